"""``POST /v1/speakers``: register a reference recording once, name it by id in score requests."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request

from audio_reward.protocol import SpeakerResponse

from .auth import require_api_key
from .body import read_body, require_json
from .deps import Parts
from .responses import OrjsonResponse, error_responses, json_body

router = APIRouter(tags=["speakers"], dependencies=[Depends(require_api_key), Depends(require_json)])


@router.post(
    "/v1/speakers",
    summary="Register a speaker reference",
    response_class=OrjsonResponse,
    responses={200: {"model": SpeakerResponse, "description": "The reference's id."},
               **error_responses(400, 401, 408, 413, 415, 429, 500, 503)},
    openapi_extra=json_body("SpeakerRequest"),
)
async def register_speaker(request: Request, parts: Parts) -> OrjsonResponse:
    """Embed the recording with the speaker model and keep it; score requests then send ``speaker_reference_id``."""
    return OrjsonResponse(await parts.signals.register(await read_body(request, parts.settings, audio=False)))
