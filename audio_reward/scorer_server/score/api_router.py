"""Scoring routes: thin HTTP over :class:`ScoringService`.

Bodies are read raw (with the size limit) and parsed by the protocol
package, not by FastAPI body models, so every protocol error keeps its code
and field path; OpenAPI still documents the request and response models.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from audio_reward.protocol import BatchScoreResponse, ScoreResponse

from ..auth import require_api_key
from ..body import read_body, require_json
from ..middleware import request_id_of
from ..responses import OrjsonResponse, error_responses, json_body
from ..state import get_state
from .serving import ScoringService

router = APIRouter(tags=["scoring"], dependencies=[Depends(require_api_key), Depends(require_json)])

_ERRORS = error_responses(400, 401, 413, 415, 429, 500, 503, 504)
_SCORE_DOC = dict(
    response_class=OrjsonResponse,
    responses={200: {"model": ScoreResponse, "description": "Flat score and diagnostics."}, **_ERRORS},
    openapi_extra=json_body("ScoreRequest"),
)


async def _score(request: Request) -> OrjsonResponse:
    state = get_state(request)
    body = await read_body(request, state.settings.max_body_bytes)
    result = await ScoringService(state).score(body, request_id_of(request))
    return OrjsonResponse(result)


@router.post("/v1/score", summary="Score one utterance", **_SCORE_DOC)
async def score_v1(request: Request) -> OrjsonResponse:
    """Transcribe the speech and score it against ``prompt``; answers one flat object."""
    return await _score(request)


@router.post("/score", summary="Score one utterance (verl-omni path)", **_SCORE_DOC)
async def score_compat(request: Request) -> OrjsonResponse:
    """Same as ``POST /v1/score``: the path verl-omni's audio scorer client posts to."""
    return await _score(request)


@router.post(
    "/v1/score/batch",
    summary="Score several utterances",
    response_class=OrjsonResponse,
    responses={200: {"model": BatchScoreResponse, "description": "Results in request order."}, **_ERRORS},
    openapi_extra=json_body("BatchScoreRequest"),
)
async def score_batch(request: Request) -> OrjsonResponse:
    """Score every item; a failing item becomes an error object in its slot, the others still score."""
    state = get_state(request)
    body = await read_body(request, state.settings.max_body_bytes)
    result = await ScoringService(state).score_batch(body, request_id_of(request))
    return OrjsonResponse(result)
