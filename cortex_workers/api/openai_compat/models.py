"""`/v1/models`: the models a response may name, in OpenAI's list shape (and `auto`, the
router's choice)."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse
from openai.types import Model

from ...errors import NotFound
from ...turns.guards.modes import AUTO
from ..deps import RuntimeDep, TenantDep
from .chains import usable_models

router = APIRouter(prefix="/v1/models", tags=["openai"])
ROUTER_OWNER = "cortex-router"


def _models(models: dict[str, str]) -> list[Model]:
    listed = [Model(id=AUTO, object="model", created=0, owned_by=ROUTER_OWNER)]
    listed += [
        Model(id=m, object="model", created=0, owned_by=provider) for m, provider in models.items()
    ]
    return listed


@router.get("")
def list_models(rt: RuntimeDep, _: TenantDep) -> JSONResponse:
    """Every model of an available provider (see `/v1/providers`), and `auto`."""
    data = [m.model_dump(mode="json") for m in _models(usable_models(rt))]
    return JSONResponse({"object": "list", "data": data})


@router.get("/{model}")
def retrieve_model(model: str, rt: RuntimeDep, _: TenantDep) -> JSONResponse:
    for m in _models(usable_models(rt)):
        if m.id == model:
            return JSONResponse(m.model_dump(mode="json"))
    raise NotFound(f"the model {model!r} does not exist here", code="model_not_found")
