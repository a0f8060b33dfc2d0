"""The API's route paths and answer ``object`` names are spelled once (`primenb.protocol.openai_api`):
the app declares its routes with them, the client calls them, the wire format writes them."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import primenb
from primenb.protocol import openai_api as api
from primenb.serve.app import ROUTES
from primenb.serve.generate import ROUTES as TOKEN_ROUTES

SERVE = Path(primenb.__file__).parent / "serve"
ROUTE_ROOTS = (api.API_ROOT, "/admin", "/inference", api.HEALTH, api.VERSION)
OBJECTS = {api.CHAT_COMPLETION, api.CHAT_COMPLETION_CHUNK, api.TEXT_COMPLETION}


def test_the_app_serves_every_declared_route() -> None:
    paths = {r.path for r in [*ROUTES, *TOKEN_ROUTES]}
    declared = {api.HEALTH, api.VERSION, api.MODELS, api.CHAT_COMPLETIONS, api.COMPLETIONS, api.LOAD_LORA}
    declared |= {api.UNLOAD_LORA, api.GENERATE, api.ADMIN_STATS, api.ADMIN_MODELS, api.ADMIN_SHUTDOWN}
    assert declared <= paths
    assert {p.split("/{")[0] for p in paths} == declared  # and nothing else (an id below two of them)


@pytest.mark.parametrize("chat", [True, False])
def test_a_completion_and_its_chunks_name_their_object(chat: bool) -> None:
    whole, chunk = api.completion_object(chat, chunk=False), api.completion_object(chat, chunk=True)
    assert (whole, chunk) == (
        ("chat.completion", "chat.completion.chunk") if chat else ("text_completion", "text_completion")
    )


@pytest.mark.parametrize("path", sorted(SERVE.glob("*.py")))
def test_the_serving_modules_do_not_spell_a_route_or_object_again(path: Path) -> None:
    spelled = [
        f"{n.lineno}: {n.value!r}"
        for n in ast.walk(ast.parse(path.read_text()))
        if isinstance(n, ast.Constant)
        and isinstance(n.value, str)
        and (n.value in OBJECTS or n.value.startswith(ROUTE_ROOTS))
    ]
    assert spelled == [], f"{path.name} spells {spelled}; use primenb.protocol.openai_api"
