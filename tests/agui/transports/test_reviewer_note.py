"""A reviewer's note on a decision, over the HTTP decisions endpoint and an AG-UI resume."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import aais
import httpx
import pytest

from aais_agui import run_agent_input
from aais_langgraph import build_decision
from aais_langgraph.protocol import note_of, with_note
from aais_langgraph.tools import NOTE_MAX_LENGTH

from ..http_support import agui_run
from ..served_site import Site, served_site

MALLORY = {"id": "mallory", "type": "human"}
NOTE_POINTER = "/decision/extensions/aais-langgraph.org~1note"


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    with served_site(tmp_path_factory.mktemp("note")) as served:
        yield served


@pytest.fixture
def client(site: Site) -> Iterator[httpx.Client]:
    with httpx.Client(
        base_url=site.url, headers={"Authorization": "Bearer alice-token"}, timeout=30
    ) as client:
        yield client


def pause(client: httpx.Client) -> tuple[str, dict[str, Any]]:
    thread_id = f"thread_{uuid.uuid4().hex}"
    events = agui_run(client, "/agent", run_agent_input(thread_id, text=f"delete /srv/{thread_id}"))
    [interrupt] = events[-1]["outcome"]["interrupts"]
    return thread_id, interrupt


def denial(interrupt: dict[str, Any], note: Any) -> dict[str, Any]:
    body = build_decision(interrupt["metadata"]["aais"], decision="deny", actor=MALLORY).to_json()
    body["decision"]["extensions"] = {"aais-langgraph.org/note": note}
    return body


def request_id(interrupt: dict[str, Any]) -> str:
    return str(interrupt["metadata"]["aais"]["request"]["id"])


def test_a_note_posted_with_a_denial_is_recorded_with_its_resolution(
    client: httpx.Client, site: Site
) -> None:
    _, interrupt = pause(client)
    response = client.post(
        f"/approvals/{request_id(interrupt)}/decisions", json=denial(interrupt, "Keep the file.")
    )
    assert response.status_code == 200
    resolved = aais.validate(response.json())
    assert resolved["resolution"]["extensions"]["aais-langgraph.org/note"] == "Keep the file."
    recorded = site.authority.get_resolution(request_id(interrupt))
    assert recorded is not None and note_of(recorded) == "Keep the file."


def test_a_note_too_long_is_refused_and_the_request_stays_answerable(
    client: httpx.Client, site: Site
) -> None:
    _, interrupt = pause(client)
    path = f"/approvals/{request_id(interrupt)}/decisions"
    response = client.post(path, json=denial(interrupt, "z" * (NOTE_MAX_LENGTH + 1)))
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "aais.invalid_envelope" and NOTE_POINTER in error["message"]
    assert "zzzz" not in response.text
    assert site.authority.get_resolution(request_id(interrupt)) is None
    assert client.post(path, json=denial(interrupt, "Shorter.")).status_code == 200


def test_an_agui_resume_carries_the_note_and_refuses_a_bad_one_before_recording(
    client: httpx.Client, site: Site
) -> None:
    thread_id, interrupt = pause(client)

    def resume(note: Any) -> list[dict[str, Any]]:
        entry = {
            "interruptId": interrupt["id"],
            "status": "resolved",
            "payload": {"aais": denial(interrupt, note)},
        }
        return agui_run(client, "/agent", run_agent_input(thread_id, resume=[entry]))

    refused = resume(["not", "text"])
    assert refused[1]["type"] == "RUN_ERROR" and refused[1]["code"] == "aais.invalid_resume"
    assert site.authority.get_resolution(request_id(interrupt)) is None

    decided = with_note(
        build_decision(interrupt["metadata"]["aais"], decision="deny", actor=MALLORY), "Not now."
    )
    entry = {"interruptId": interrupt["id"], "status": "resolved", "payload": decided.to_json()}
    events = agui_run(client, "/agent", run_agent_input(thread_id, resume=[entry]))
    assert events[-1]["type"] == "RUN_FINISHED"
    recorded = site.authority.get_resolution(request_id(interrupt))
    assert recorded is not None and note_of(recorded) == "Not now."
    assert site.effects.list(thread_id) == []
