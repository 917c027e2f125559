"""What the first evaluation's cheaper paths (issue #54) must keep: a message's four
templates rendered from one shared context read exactly what each would read alone, and a
state moved by `evolve` is the state `dataclasses.replace` makes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from gpuradar.alerts.messages import TEMPLATE_NAMES, Renderer
from gpuradar.alerts.state import AlertState, evolve, fresh_state

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def context() -> dict:
    return {"kind": "firing", "rule": SimpleNamespace(name="r", text="H100 under $2/h",
                                                      reading="H100, per GPU-hour"),
            "now": NOW, "count": 2, "offers": [], "more": 0, "best": "$1.87",
            "previous": "", "limit": "$2.00", "reference": "", "reference_name": "",
            "cheapest_now": "", "unit": "GPU-h", "per_instance": False, "source": None}


def test_a_templates_own_variables_stay_in_that_template(tmp_path):
    # The title sets `kind` and `best` for itself; the bodies still read the message's,
    # the title as rendered, and the environment's globals (`range`).
    (tmp_path / "title.txt.j2").write_text(
        '{% set kind = "changed" %}{% set best = "$0" %}{{ kind }} {{ best }}')
    (tmp_path / "message.md.j2").write_text(
        "{{ kind }} {{ best }} [{{ title }}] {% for i in range(2) %}{{ i }}{% endfor %}")
    (tmp_path / "message.txt.j2").write_text("{{ kind }} {{ title }}")
    (tmp_path / "email.html.j2").write_text("<p>{{ rule.text }} {{ kind }} {{ best }}</p>")
    message = Renderer(tmp_path).render(context(), "warning")
    assert message.title == "changed $0"
    assert message.markdown == "firing $1.87 [changed $0] 01"
    assert message.text == "firing changed $0"
    assert message.html == "<p>H100 under $2/h firing $1.87</p>"


def test_a_message_is_what_each_template_renders_alone():
    renderer = Renderer(None)
    message = renderer.render(context(), "warning")
    alone = {name: renderer.env.get_template(name).render(context(), title=message.title)
             for name in TEMPLATE_NAMES}
    assert message.markdown == alone["message.md.j2"].strip()
    assert message.text == alone["message.txt.j2"].strip()
    assert message.html == alone["email.html.j2"].strip()
    assert "cheapest <b>$1.87/GPU-h</b>" in message.html


def test_a_template_error_is_raised_as_jinja_reports_it(tmp_path):
    (tmp_path / "message.md.j2").write_text("{{ no_such_variable }}")
    with pytest.raises(Exception, match="no_such_variable"):
        Renderer(tmp_path).render(context(), "warning")


@pytest.mark.parametrize("changes", [
    {},
    {"state": "firing", "fired_at": NOW, "best_value": 1.87, "best": {"source": "aws"}},
    {"state": "inactive", "active_count": 0, "pending_since": None, "description": "x"},
])
def test_evolve_makes_the_state_replace_makes(changes):
    start = replace(fresh_state("rule:r", "r", "0123456789abcdef", "CNY", "H100 under ¥9/h"),
                    active_count=3, pending_since=NOW, notified_value=2.5)
    moved = evolve(start, **changes)
    assert moved == replace(start, **changes)
    assert moved.as_row() == replace(start, **changes).as_row()
    assert type(moved) is AlertState
    with pytest.raises(AttributeError):
        moved.state = "pending"  # type: ignore[misc]  # still frozen


def test_evolve_refuses_a_field_the_state_does_not_have():
    with pytest.raises(KeyError):
        evolve(fresh_state("rule:r", "r", "", "USD"), no_such_field=1)
