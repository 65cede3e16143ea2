"""`--seed` (issue 24 item 17): one parser for metrics, compare, ablate, report and tune; a seed outside 0..2**32-1
is a usage error naming the option, never an internal error."""

from __future__ import annotations

import pytest

from gsrlang.cli import main
from gsrlang.commands.common import SEED_MAX

COMMANDS = {"metrics": ["r.jsonl"], "compare": ["a.jsonl", "b.jsonl"], "ablate": ["p.gsr", "--trace", "t.jsonl"],
            "report": ["r.jsonl"], "tune": ["p.gsr", "--data", "d.jsonl"]}


@pytest.mark.parametrize("seed", ["-1", str(2**70), str(SEED_MAX + 1), "1.5", "x"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_seed_is_a_usage_error(command, seed, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, *COMMANDS[command], "--seed", seed])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert f"gsr {command}: error: argument --seed: must be a whole number from 0 to {SEED_MAX}, not `{seed}`" in err
    assert "internal error" not in err


def test_the_largest_seed_tunes(tmp_path, capsys):
    pytest.importorskip("scipy")
    try:
        from test_tune import SYNTH, _write_data, synthetic
    except ImportError:
        from tests.test_tune import SYNTH, _write_data, synthetic
    prog, data = tmp_path / "synth.gsr", tmp_path / "d.jsonl"
    prog.write_text(SYNTH)
    _write_data(data, synthetic(30))
    assert main(["tune", str(prog), "--data", str(data), "--id-field", "id", "--label-field", "label", "--folds", "2",
                 "--bootstrap", "10", "--seed", str(SEED_MAX)]) == 0  # was: an internal error past 2**32
    assert f"seed {SEED_MAX}" in capsys.readouterr().out


BOOTSTRAP = {**COMMANDS, "run": ["p.gsr", "--data", "d.jsonl"], "replay": ["t.jsonl"]}


@pytest.mark.parametrize("command", sorted(BOOTSTRAP))
def test_a_negative_bootstrap_is_a_usage_error_of_every_command(command, capsys):
    """`--bootstrap` has one parser too (commands.common.bootstrap_count); run, replay and tune took -1."""
    with pytest.raises(SystemExit) as stop:
        main([command, *BOOTSTRAP[command], "--bootstrap", "-1"])
    assert stop.value.code == 2
    assert f"gsr {command}: error: argument --bootstrap: must not be negative" in capsys.readouterr().err
