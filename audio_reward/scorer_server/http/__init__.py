"""The HTTP face of the scorer: thin FastAPI routers over the service built at start-up.

One router per feature (``score``, ``openai``, ``info``, ``health``,
``metrics``); each takes its parts from ``app.state`` through the getters in
:mod:`.deps`.  Around them: the request-id and metrics middleware, the error
handlers that give every error the protocol's (or OpenAI's) shape, the API key
check, bounded body reading, and the uvicorn configuration with its limits on
request heads (:mod:`.server`).
"""
