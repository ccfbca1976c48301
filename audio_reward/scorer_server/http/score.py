"""Scoring routes: thin HTTP over the :class:`~..service.pipeline.ScoringPipeline` built at start-up.

Bodies are read raw (with the size limit) and parsed by the protocol
package, not by FastAPI body models, so every protocol error keeps its code
and field path; OpenAPI still documents the request and response models.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response

from audio_reward.protocol import BatchScoreResponse, ScoreResponse

from .auth import require_api_key
from .body import is_multipart_form, read_body, require_json, require_json_or_form
from .deps import Parts
from .middleware import request_id_of
from .responses import OrjsonResponse, encode_off_loop, error_responses, json_body, score_response
from .score_form import form_score_body, score_body

router = APIRouter(tags=["scoring"], dependencies=[Depends(require_api_key)])

_ERRORS = error_responses(400, 401, 408, 413, 415, 429, 500, 503, 504)
_SCORE_DOC: dict[str, Any] = {
    "response_class": OrjsonResponse,
    "responses": {200: {"model": ScoreResponse, "description": "Flat score and diagnostics."}, **_ERRORS},
    "openapi_extra": score_body(),
    "dependencies": [Depends(require_json_or_form)],
}


@router.post("/v1/score", summary="Score one utterance", **_SCORE_DOC)
async def score_v1(request: Request, parts: Parts) -> Response:
    """Transcribe the speech and score it against ``prompt``; answers one flat object."""
    body = await read_body(request, parts.settings)
    if is_multipart_form(request):
        body = await form_score_body(request, body)
    return score_response(await parts.pipeline.score(body, request_id_of(request)))


@router.post("/score", summary="Score one utterance (verl-omni path)", **_SCORE_DOC)
async def score_compat(request: Request, parts: Parts) -> Response:
    """Same as ``POST /v1/score``: the path verl-omni's audio scorer client posts to."""
    return await score_v1(request, parts)


@router.post(
    "/v1/score/batch",
    summary="Score several utterances",
    response_class=OrjsonResponse,
    responses={200: {"model": BatchScoreResponse, "description": "Results in request order."}, **_ERRORS},
    openapi_extra=json_body("BatchScoreRequest"),
    dependencies=[Depends(require_json)],
)
async def score_batch(request: Request, parts: Parts) -> Response:
    """Score every item; a failing item becomes an error object in its slot, the others still score."""
    result = await parts.pipeline.score_batch(await read_body(request, parts.settings), request_id_of(request))
    # Up to max_batch_items results with prompt-sized fields: encoded off the event loop.
    return await encode_off_loop(result)
