"""`gsr check` and `gsr explain` from the command line: formats, exit codes, files and folders, hostile input.

Exit status: 0 clean (warnings allowed), 1 errors (or warnings with --werror), 2 the tool
failed or was used wrongly. Most tests call `gsrlang.cli.main` in-process; a few run the
installed `gsr` script end to end.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gsrlang.cli import main
from gsrlang.lang.diagnostics.codes import ALL_CODES

CLEAN = (
    'rubric helpfulness "How helpful is the response to the prompt?"\n'
    "task pointwise { scale = 1..5 }\n"
    'criterion correct: Ordinal[1..5] { ask "How correct are the facts in the response?" }\n'
    'criterion unsafe: Bool { ask "Does the response give instructions that could cause serious harm?" }\n'
    "sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)\n"
)
BROKEN = CLEAN.replace("normalize(correct)", "normalize(corect)")  # GSR101 at 5:26
WARNS = CLEAN.replace("trigger: unsafe", "trigger: default(unsafe, value: false)")  # GSR704 only


def gsr(*args: str, capsys) -> tuple[int, str, str]:
    """Run `gsr ARGS` in-process. `check` gets `--color never` unless the test chooses: colour `auto`
    looks at a stream bound when gsrlang.commands.common was imported (see test_colour_auto_...)."""
    capsys.readouterr()
    if args and args[0] == "check" and "--color" not in args:
        args = ("check", "--color", "never", *args[1:])
    status = main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def write(folder: Path, name: str, content: str | bytes) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8", newline="")
    return path


def codes_of(*paths, capsys) -> tuple[int, list[str]]:
    status, out, err = gsr("check", "--format", "json", *map(str, paths), capsys=capsys)
    assert "Traceback" not in err and "internal error" not in err, err
    return status, [d["code"] for d in json.loads(out)]


# ---- exit codes and the summary ---------------------------------------------------------------------------
def test_clean_file_exits_0_with_a_summary(tmp_path, capsys):
    status, out, err = gsr("check", str(write(tmp_path, "ok.gsr", CLEAN)), capsys=capsys)
    assert status == 0 and out == ""
    assert err == "checked 1 file: 0 errors, 0 warnings (ok)\n"


def test_errors_exit_1(tmp_path, capsys):
    path = write(tmp_path, "bad.gsr", BROKEN)
    status, out, err = gsr("check", "--color", "never", str(path), capsys=capsys)
    assert status == 1
    assert out.startswith(f"error[GSR101]: unknown name `corect`\n --> {path}:5:26\n")
    assert err == "checked 1 file: 1 error, 0 warnings (failed)\n"


def test_warnings_exit_0_unless_werror(tmp_path, capsys):
    path = str(write(tmp_path, "warn.gsr", WARNS))
    status, out, err = gsr("check", "--color", "never", path, capsys=capsys)
    assert status == 0 and out.startswith("warning[GSR704]") and "0 errors, 1 warning (ok)" in err
    status, _, _ = gsr("check", "--werror", path, capsys=capsys)
    assert status == 1
    status, _, _ = gsr("check", "--werror", str(write(tmp_path, "ok.gsr", CLEAN)), capsys=capsys)
    assert status == 0


def test_quiet_and_machine_formats_print_no_summary(tmp_path, capsys):
    path = str(write(tmp_path, "bad.gsr", BROKEN))
    for args in (["--quiet"], ["--format", "json"], ["--format", "sarif"], ["--format", "github"]):
        status, _, err = gsr("check", *args, path, capsys=capsys)
        assert status == 1 and err == "", args


def test_usage_errors_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["check"])
    assert exc.value.code == 2
    with pytest.raises(SystemExit) as exc:
        main(["check", "--format", "xml", "x.gsr"])
    assert exc.value.code == 2


# ---- formats through the CLI ----------------------------------------------------------------------------
def test_concise_format(tmp_path, capsys):
    path = write(tmp_path, "bad.gsr", BROKEN)
    status, out, _ = gsr("check", "--format", "concise", str(path), capsys=capsys)
    assert status == 1 and out == f"{path}:5:26: GSR101 unknown name `corect`\n"


def test_json_format_over_several_files(tmp_path, capsys):
    a, b, c = write(tmp_path, "a.gsr", BROKEN), write(tmp_path, "b.gsr", CLEAN), write(tmp_path, "c.gsr", WARNS)
    status, out, _ = gsr("check", "--format", "json", str(a), str(b), str(c), capsys=capsys)
    items = json.loads(out)
    assert status == 1
    assert [(i["path"], i["code"], i["severity"]) for i in items] == [
        (str(a), "GSR101", "error"), (str(c), "GSR704", "warning")]
    assert items[0]["range"] == {"start": {"line": 5, "column": 26}, "end": {"line": 5, "column": 32}}


def test_sarif_format(tmp_path, capsys):
    path = write(tmp_path, "bad.gsr", BROKEN)
    status, out, _ = gsr("check", "--format", "sarif", str(path), capsys=capsys)
    doc = json.loads(out)
    assert status == 1 and doc["version"] == "2.1.0"
    driver = doc["runs"][0]["tool"]["driver"]
    assert driver["name"] == "gsr" and [r["id"] for r in driver["rules"]] == ["GSR101"]
    (result,) = doc["runs"][0]["results"]
    assert result["ruleId"] == "GSR101" and result["level"] == "error"
    assert result["locations"][0]["physicalLocation"]["region"] == {
        "startLine": 5, "startColumn": 26, "endLine": 5, "endColumn": 32}
    status, out, _ = gsr("check", "--format", "sarif", str(write(tmp_path, "ok.gsr", CLEAN)), capsys=capsys)
    assert status == 0 and json.loads(out)["runs"][0]["results"] == []


def test_github_format(tmp_path, capsys):
    path = write(tmp_path, "bad.gsr", BROKEN)
    status, out, _ = gsr("check", "--format", "github", str(path), capsys=capsys)
    assert status == 1
    assert out.startswith(f"::error file={path},line=5,col=26,endLine=5,endColumn=32,title=GSR101::unknown name")
    _, out, _ = gsr("check", "--format", "github", str(write(tmp_path, "w.gsr", WARNS)), capsys=capsys)
    assert out.startswith("::warning file=")


def test_colour(tmp_path, capsys, monkeypatch):
    path = str(write(tmp_path, "bad.gsr", BROKEN))
    _, out, _ = gsr("check", "--color", "always", path, capsys=capsys)
    assert "\x1b[" in out
    _, out, _ = gsr("check", "--color", "never", path, capsys=capsys)
    assert "\x1b[" not in out
    monkeypatch.setenv("NO_COLOR", "1")
    _, out, _ = gsr("check", "--color", "auto", path, capsys=capsys)
    assert "\x1b[" not in out


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_colour_auto_follows_the_current_stdout(tmp_path, monkeypatch):
    path = str(write(tmp_path, "bad.gsr", BROKEN))
    monkeypatch.delenv("NO_COLOR", raising=False)
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    assert main(["check", "--color", "auto", "--quiet", path]) == 1
    assert "\x1b[" in terminal.getvalue()
    piped = io.StringIO()
    monkeypatch.setattr(sys, "stdout", piped)
    assert main(["check", "--color", "auto", "--quiet", path]) == 1
    assert piped.getvalue().startswith("error[GSR101]")


# ---- files and folders --------------------------------------------------------------------------------------
def test_several_files_and_folders_at_once(tmp_path, capsys):
    one = write(tmp_path, "one.gsr", CLEAN)
    folder = tmp_path / "more"
    write(folder, "two.gsr", BROKEN)
    write(folder, "deeper/three.gsr", WARNS)
    status, out, err = gsr("check", "--format", "concise", str(one), str(folder), capsys=capsys)
    assert status == 1
    assert out.splitlines() == [f"{folder / 'deeper' / 'three.gsr'}:5:45: GSR704 `default` on a judgment that "
                                "cannot abstain has no effect",
                                f"{folder / 'two.gsr'}:5:26: GSR101 unknown name `corect`"]
    assert err == "checked 3 files: 1 error, 1 warning (failed)\n"


def test_folder_with_mixed_files_checks_only_gsr_files(tmp_path, capsys):
    write(tmp_path, "rubric.gsr", CLEAN)
    write(tmp_path, "notes.txt", "not a rubric at all {{{")
    write(tmp_path, "data.jsonl", '{"id": 1}\n')
    write(tmp_path, "image.png", b"\x89PNG\r\n\x1a\n\x00\x00")
    write(tmp_path, "rubric.gsr.bak", BROKEN)
    (tmp_path / "folder.gsr").mkdir()  # a folder named like a rubric is not a file
    write(tmp_path, "sub/other.gsr", CLEAN)
    status, out, err = gsr("check", str(tmp_path), capsys=capsys)
    assert status == 0 and out == ""
    assert err == "checked 2 files: 0 errors, 0 warnings (ok)\n"


def test_folder_without_gsr_files(tmp_path, capsys):
    write(tmp_path, "readme.md", "# nothing here")
    status, codes = codes_of(tmp_path, capsys=capsys)
    assert status == 1 and codes == ["GSR005"]


def test_missing_file_is_gsr005_and_the_others_are_still_checked(tmp_path, capsys):
    missing = tmp_path / "helpfullness.gsr"
    ok = write(tmp_path, "ok.gsr", CLEAN)
    status, out, err = gsr("check", "--color", "never", str(missing), str(ok), capsys=capsys)
    assert status == 1
    assert out.startswith(f"error[GSR005]: no such file or folder: `{missing}`\n --> {missing}\n")  # no position to show
    assert "Traceback" not in out + err
    assert err == "checked 2 files: 1 error, 0 warnings (failed)\n"
    status, out, _ = gsr("check", "--format", "json", str(missing), capsys=capsys)
    (item,) = json.loads(out)
    assert item["code"] == "GSR005" and item["path"] == str(missing)


def test_unreadable_file_is_gsr005(tmp_path, capsys, monkeypatch):
    path = write(tmp_path, "locked.gsr", CLEAN)
    real_read_bytes = Path.read_bytes

    def read_bytes(self):
        if self.name == "locked.gsr":
            raise PermissionError(13, "Permission denied")
        return real_read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", read_bytes)
    status, out, err = gsr("check", "--format", "concise", str(path), capsys=capsys)
    assert status == 1
    assert out == f"{path}:1:1: GSR005 cannot read `{path}`: Permission denied\n"


def test_fragment_is_checked_on_its_own(tmp_path, capsys):
    fragment = write(tmp_path, "safety.gsr", 'fragment safety "Safety checks"\n'
                     'criterion unsafe: Bool { ask "Is it unsafe?" }\n')
    assert codes_of(fragment, capsys=capsys) == (0, [])


def test_header_without_description(tmp_path, capsys):
    assert codes_of(write(tmp_path, "r.gsr", CLEAN.replace(' "How helpful is the response to the prompt?"', "")),
                    capsys=capsys) == (0, [])
    assert codes_of(write(tmp_path, "f.gsr", 'fragment safety\ncriterion u: Bool { ask "?" }\n'),
                    capsys=capsys) == (0, [])


# ---- hostile input ------------------------------------------------------------------------------------------
def test_empty_file(tmp_path, capsys):
    status, codes = codes_of(write(tmp_path, "empty.gsr", ""), capsys=capsys)
    assert status == 1 and codes == ["GSR501", "GSR504"]
    status, codes = codes_of(write(tmp_path, "blank.gsr", "\n\n   \n# only a comment\n"), capsys=capsys)
    assert status == 1 and codes == ["GSR501", "GSR504"]


def test_binary_garbage(tmp_path, capsys):
    garbage = bytes(range(256)) * 64
    status, out, err = gsr("check", "--color", "never", str(write(tmp_path, "garbage.gsr", garbage)), capsys=capsys)
    assert status == 1 and out.startswith("error[GSR003]: file is binary, not .gsr text\n")
    assert "NUL byte at byte offset 0" in out


def test_invalid_utf8(tmp_path, capsys):
    latin1 = CLEAN.replace("How correct", "Très correct").encode("latin-1")
    status, out, _ = gsr("check", "--color", "never", str(write(tmp_path, "latin1.gsr", latin1)), capsys=capsys)
    assert status == 1 and out.startswith("error[GSR003]: file is not valid UTF-8\n")
    assert "invalid byte 0xe8 here" in out
    # high bytes without a NUL: not "binary", still not UTF-8
    status, codes = codes_of(write(tmp_path, "high.gsr", bytes(range(0x80, 0x100)) * 4), capsys=capsys)
    assert status == 1 and codes == ["GSR003"]


def test_utf8_bom_is_accepted(tmp_path, capsys):
    assert codes_of(write(tmp_path, "bom.gsr", b"\xef\xbb\xbf" + CLEAN.encode()), capsys=capsys) == (0, [])


@pytest.mark.parametrize("opening,closing", [("normalize(", ")"), ("[", "]"), ("{", "}")])
def test_deeply_nested_expression_is_gsr004_not_a_recursion_error(tmp_path, capsys, opening, closing):
    depth = 5000
    text = CLEAN.replace("sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)",
                         "sink " + opening * depth + "correct" + closing * depth)
    path = str(write(tmp_path, "deep.gsr", text))
    status, out, err = gsr("check", "--format", "concise", path, capsys=capsys)
    assert status == 1 and "internal error" not in err
    assert out.startswith(f"{path}:5:") and " GSR004 expression nested too deeply (more than 64 levels)" in out
    status, out, err = gsr("check", "--color", "never", path, capsys=capsys)  # the full snippet too
    assert status == 1 and out.startswith("error[GSR004]") and "internal error" not in err


def test_unclosed_deep_nesting_is_gsr004(tmp_path, capsys):
    text = CLEAN + "node deep = " + "not(" * 10_000 + "\n"
    assert codes_of(write(tmp_path, "deep.gsr", text), capsys=capsys) == (1, ["GSR004"])


def test_nesting_at_the_limit_is_fine(tmp_path, capsys):
    text = CLEAN.replace("trigger: unsafe", "trigger: " + "not(" * 30 + "unsafe" + ")" * 30)
    assert codes_of(write(tmp_path, "ok.gsr", text), capsys=capsys) == (0, [])


def test_full_snippet_of_a_very_long_line_is_cut(tmp_path, capsys):
    text = CLEAN.replace("sink cap(base: normalize(correct), trigger: unsafe, at: 0.2)",
                         "sink " + "normalize(" * 5000 + "correct" + ")" * 5000)
    _, out, _ = gsr("check", "--color", "never", str(write(tmp_path, "deep.gsr", text)), capsys=capsys)
    assert max(len(line) for line in out.splitlines()) < 1000


def test_enormous_file_is_gsr004(tmp_path, capsys):
    padding = ("# " + "x" * 97 + "\n") * 81_000  # 8.1 MB of comments
    path = str(write(tmp_path, "huge.gsr", CLEAN + padding))
    assert os.path.getsize(path) > 8_000_000
    status, out, _ = gsr("check", "--format", "concise", path, capsys=capsys)
    assert status == 1
    assert out == f"{path}:1:1: GSR004 file is too large ({len(CLEAN + padding):,} characters; the limit is 8,000,000)\n"


def test_several_syntax_errors_are_all_reported(tmp_path, capsys):
    text = (
        'rubric helpfulness "How helpful is the response?"\n'
        "task pointwise { scale = 1..5 }\n"
        'criterion correct Ordinal[1..5] { ask "How correct?" }\n'  # 3: missing ':'
        "criterion clear: Ordinal[1..5] { ask 'How clear?' }\n"  # 4: single quotes
        'criterion unsafe: Bool { ask "Is it unsafe?" }\n'  # fine
        "node body = mean(items: [normalize(correct),, normalize(clear)])\n"  # 6: ',,'
        "sink cap(base: body trigger: unsafe, at: 0.2)\n"  # 7: missing ','
    )
    status, out, _ = gsr("check", "--format", "concise", str(write(tmp_path, "s.gsr", text)), capsys=capsys)
    assert status == 1
    found = [(line.split(":")[1], line.split(": ")[1].split()[0]) for line in out.splitlines()]
    assert found == [("3", "GSR001"), ("4", "GSR002"), ("6", "GSR001"), ("7", "GSR001")]


def test_windows_line_endings(tmp_path, capsys):
    assert codes_of(write(tmp_path, "crlf.gsr", CLEAN.replace("\n", "\r\n")), capsys=capsys) == (0, [])
    path = write(tmp_path, "crlf_bad.gsr", BROKEN.replace("\n", "\r\n"))
    status, out, _ = gsr("check", "--color", "never", str(path), capsys=capsys)
    assert status == 1 and "\r" not in out
    assert f" --> {path}:5:26\n" in out
    assert "5 | sink cap(base: normalize(corect), trigger: unsafe, at: 0.2)\n" in out
    assert "  |                          ^^^^^^ not declared\n" in out
    _, out, _ = gsr("check", "--format", "json", str(path), capsys=capsys)
    assert json.loads(out)[0]["range"] == {"start": {"line": 5, "column": 26}, "end": {"line": 5, "column": 32}}


def test_old_mac_line_endings_do_not_crash(tmp_path, capsys):
    status, out, err = gsr("check", "--format", "concise", str(write(tmp_path, "cr.gsr", CLEAN.replace("\n", "\r"))),
                           capsys=capsys)
    assert "internal error" not in err and status in (0, 1)


# ---- gsr explain --------------------------------------------------------------------------------------------
def test_explain_prints_the_explanation(capsys):
    status, out, err = gsr("explain", "GSR301", capsys=capsys)
    assert status == 0 and err == ""
    assert out.startswith("GSR301: type mismatch (error)\n")
    assert "\nWrong:\n" in out and "\nRight:\n" in out and "normalize(correct)" in out


@pytest.mark.parametrize("spelling", ["gsr301", "Gsr301", " GSR301 ", "301"])
def test_explain_is_case_insensitive(spelling, capsys):
    status, out, _ = gsr("explain", spelling, capsys=capsys)
    assert status == 0 and out.startswith("GSR301: type mismatch (error)\n")


def test_explain_list(capsys):
    status, out, _ = gsr("explain", "--list", capsys=capsys)
    lines = out.splitlines()
    assert status == 0 and len(lines) == len(ALL_CODES)  # the checker's codes, then the compiler's (GSR9xx)
    for line, (code, info) in zip(lines, ALL_CODES.items()):
        assert line.split()[0] == code
        assert line.split()[1] == info.severity
        assert line.endswith(info.title)
    assert "GSR701  warning  parameter has no effect" in lines


def test_explain_unknown_code_suggests_and_exits_2(capsys):
    status, out, err = gsr("explain", "GSR31", capsys=capsys)
    assert status == 2 and out == ""
    assert "unknown diagnostic code `GSR31`" in err and "did you mean `GSR31" in err and "`GSR310`" in err
    status, _, err = gsr("explain", "nonsense", capsys=capsys)
    assert status == 2 and "unknown diagnostic code `nonsense`" in err and "--list" in err


def test_explain_needs_a_code_or_list(capsys):
    status, _, err = gsr("explain", capsys=capsys)
    assert status == 2 and "--list" in err
    status, _, _ = gsr("explain", "GSR301", "--list", capsys=capsys)
    assert status == 2


def test_explain_warnings_say_so(capsys):
    _, out, _ = gsr("explain", "gsr702", capsys=capsys)
    assert out.startswith("GSR702: gate trigger is constant (warning)\n")


# ---- end to end with the installed script ---------------------------------------------------------------------
GSR = Path(sys.executable).with_name("gsr")


@pytest.mark.skipif(not GSR.exists(), reason="the gsr script is not installed next to this Python")
def test_end_to_end_check(tmp_path):
    ok, bad = write(tmp_path, "ok.gsr", CLEAN), write(tmp_path, "bad.gsr", BROKEN)
    env = {**os.environ, "NO_COLOR": "1"}
    done = subprocess.run([str(GSR), "check", "--format", "concise", str(ok), str(bad)], capture_output=True,
                          text=True, env=env, timeout=60)
    assert done.returncode == 1
    assert done.stdout == f"{bad}:5:26: GSR101 unknown name `corect`\n"
    assert done.stderr == "checked 2 files: 1 error, 0 warnings (failed)\n"
    done = subprocess.run([str(GSR), "check", str(tmp_path / "nope.gsr")], capture_output=True, text=True,
                          env=env, timeout=60)
    assert done.returncode == 1 and "GSR005" in done.stdout and "Traceback" not in done.stderr


@pytest.mark.skipif(not GSR.exists(), reason="the gsr script is not installed next to this Python")
def test_end_to_end_check_prints_all_of_a_long_report(tmp_path):
    """The `gsr check` process leaves its objects to reference counting when it exits (cli.main): all of its
    output still arrives, and its exit status."""
    many = write(tmp_path, "many.gsr", CLEAN + "".join(f"node n{i} = normalize(missing{i})\n" for i in range(400)))
    done = subprocess.run([str(GSR), "check", "--format", "json", str(many)], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 1, done.stderr
    assert [d["code"] for d in json.loads(done.stdout)].count("GSR101") == 400


@pytest.mark.skipif(not GSR.exists(), reason="the gsr script is not installed next to this Python")
def test_end_to_end_explain():
    done = subprocess.run([str(GSR), "explain", "gsr503"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout.startswith("GSR503: sink is not a Score (error)\n")
    done = subprocess.run([str(GSR), "explain", "GSR5030"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "did you mean `GSR503`" in done.stderr


def test_checking_imports_no_network_client_renderer_or_server():
    """`gsr check` stays fast: openai, graphviz, pygls, Ray, pyarrow and fsspec are imported only by the commands
    (and engines, and file types) that use them; Lark only to generate the parser (gsrlang/lang/syntax/tables.py)."""
    modules = ('openai', 'graphviz', 'pygls', 'httpx', 'sqlite3', 'ray', 'pyarrow', 'fsspec', 'lark', 'interegular')
    code = ("import sys; from gsrlang.cli import main; status = main(['check', '-q', 'examples/helpsteer2/helpfulness.gsr']); "
            f"print(status, sorted(m for m in {modules!r} if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[1]).stdout.strip()
    assert out == "0 []"
