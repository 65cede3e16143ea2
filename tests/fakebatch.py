"""OpenAI's Files and Batch APIs, faked, for :class:`fakeserver.FakeOpenAI` (tests and benchmarks).

Written from OpenAI's published API reference (the File object, the Batch object and its
statuses, the batch input and output line formats), not from what gsr sends:

* ``POST /v1/files`` (multipart/form-data: ``purpose=batch`` and ``file``) -> a File object
  (``id``, ``object: "file"``, ``bytes``, ``created_at``, ``filename``, ``purpose``);
  ``GET /v1/files?purpose=batch`` lists them; ``GET /v1/files/{id}/content`` returns the bytes.
* ``POST /v1/batches`` (``input_file_id``, ``endpoint``, ``completion_window: "24h"``,
  ``metadata``) -> a Batch object in status ``validating``; ``GET /v1/batches/{id}``;
  ``GET /v1/batches?limit=N&after=ID`` (newest first, ``has_more``, ``first_id``, ``last_id``);
  ``POST /v1/batches/{id}/cancel`` -> ``cancelling``, then ``cancelled``.
* Status moves on as the batch is retrieved (one step per ``GET``, so a test needs no clock):
  ``validating`` -> ``in_progress`` (``steps`` retrieves, each answering a share of the lines) ->
  ``finalizing`` -> ``completed``; ``failed`` when the input does not validate (a line that is
  not JSON, without ``custom_id``, a repeated ``custom_id``, another ``url`` than the
  endpoint, more lines than ``max_requests``); ``expired`` when ``expire_after`` steps have
  passed (the lines not answered go to the error file with code ``batch_expired``);
  ``cancelled`` after a cancel (the lines not answered get ``batch_cancelled``).
  ``request_counts`` (``total``, ``completed``, ``failed``) follow the lines.
* Every line is answered by the server's own chat-completions logic (the same responder,
  faults and checks as the online endpoint), so a batch gives the answers an online run gets.
  An answer with HTTP status 200 goes to the output file, any other status to the error file;
  both have lines ``{"id", "custom_id", "response": {"status_code", "request_id", "body"},
  "error"}``, in shuffled order (``seed``). ``line_fault(custom_id, body) -> Fault | None``
  serves a fault to one line instead of its answer.
* ``enabled = False`` answers these routes as llama.cpp's server does: 404 ``{"detail": "Not Found"}``.
* ``on_event(name, info)`` is called at ``file_uploaded`` and ``batch_created`` (after the
  answer is sent), ``batch_retrieved`` (before it is answered, with the retrieve count),
  ``content_started`` (a download has begun: half of its first line is sent, no whole line) and
  ``content_half_sent`` (half of a download is sent), so a test can kill its client there.
"""

from __future__ import annotations

import email.parser
import email.policy
import itertools
import json
import math
import random
import threading
import time
from typing import Any, Callable
from urllib.parse import parse_qs, urlsplit

TERMINAL = ("failed", "completed", "expired", "cancelled")


def error_body(status: int, message: str, param: str | None = None) -> dict:
    """An OpenAI-style error body: {"error": {"message", "type", "param", "code"}}."""
    etype = {
        400: "invalid_request_error",
        401: "authentication_error",
        404: "not_found_error",
        429: "rate_limit_exceeded",
    }.get(status, "server_error" if status >= 500 else "invalid_request_error")
    return {"error": {"message": message, "type": etype, "param": param, "code": None}}


class _Capture:
    """Stands in for the HTTP handler when a batch line is answered: keeps the status and body sent."""

    def __init__(self) -> None:
        self.status = 0
        self.payload: Any = None

    def _send(self, status: int, payload: Any, headers=None, raw: bytes | None = None) -> None:
        self.status, self.payload = status, (payload if raw is None else raw.decode("utf-8", "replace"))

    def _error(self, status: int, message: str, headers=None, param: str | None = None) -> None:
        self._send(status, error_body(status, message, param))

    def _drop(self, rst: bool = True) -> None:
        self._send(500, {"error": {"message": "the connection was dropped", "type": "server_error",
                                   "param": None, "code": None}})


class BatchAPI:
    """The Files and Batch endpoints of one fake server (see the module docstring)."""

    def __init__(self, fake) -> None:
        self.fake = fake
        self.enabled = True
        self.steps = 2  # retrieves in_progress before finalizing; each answers a share of the lines
        self.expire_after: int | None = None  # in_progress retrieves after which the batch expires
        self.fail_validation: str | None = None  # make every batch fail validation with this message
        self.max_requests = 50_000
        self.max_bytes = 200 * 1024 * 1024
        self.line_fault: Callable[[str, dict], Any] | None = None
        self.on_event: Callable[[str, dict], None] | None = None
        self.seed = 1234
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.order: list[str] = []  # batch ids, oldest first
        self.lines: list[dict] = []  # every chat body answered in a batch (with its custom_id)
        self.calls: list[tuple[str, str]] = []  # (method, path) of every Files/Batch request
        self._state: dict[str, dict] = {}  # batch id -> parsed lines, answers so far, retrieves
        self._ids = itertools.count(1)
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ routing

    def handles(self, path: str) -> bool:
        p = urlsplit(path).path.rstrip("/")
        return p.startswith("/v1/files") or p.startswith("/v1/batches")

    def get(self, h) -> None:
        parts = urlsplit(h.path)
        p, query = parts.path.rstrip("/"), parse_qs(parts.query)
        self.calls.append(("GET", p))
        if not self.enabled:
            return h._send(404, {"detail": "Not Found"})
        seg = p.split("/")[2:]  # ["files", ...] or ["batches", ...]
        if seg == ["files"]:
            purpose = (query.get("purpose") or [None])[0]
            data = [self._file_object(f) for f in self.files.values() if purpose in (None, f["purpose"])]
            return h._send(200, {"object": "list", "data": data, "has_more": False})
        if len(seg) == 3 and seg[0] == "files" and seg[2] == "content":
            return self._content(h, seg[1])
        if len(seg) == 2 and seg[0] == "files":
            f = self.files.get(seg[1])
            return h._send(200, self._file_object(f)) if f else h._error(404, f"No such File object: {seg[1]}")
        if seg == ["batches"]:
            return self._list(h, query)
        if len(seg) == 2 and seg[0] == "batches":
            return self._retrieve(h, seg[1])
        h._error(404, f"fakeserver: no route GET {h.path}")

    def post(self, h, raw: bytes) -> None:
        p = urlsplit(h.path).path.rstrip("/")
        self.calls.append(("POST", p))
        if not self.enabled:
            return h._send(404 if p != "/v1/batches" else 405, {"detail": "Not Found" if p != "/v1/batches"
                                                                 else "Method Not Allowed"})
        if p == "/v1/files":
            return self._upload(h, raw)
        if p == "/v1/batches":
            return self._create(h, raw)
        seg = p.split("/")[2:]
        if len(seg) == 3 and seg[0] == "batches" and seg[2] == "cancel":
            return self._cancel(h, seg[1])
        h._error(404, f"fakeserver: no route POST {h.path}")

    def _event(self, name: str, **info) -> None:
        if self.on_event is not None:
            self.on_event(name, info)

    # ------------------------------------------------------------------ files

    def _file_object(self, f: dict) -> dict:
        return {k: f[k] for k in ("id", "object", "bytes", "created_at", "filename", "purpose")}

    def _upload(self, h, raw: bytes) -> None:
        ctype = h.headers.get("Content-Type", "")
        if not ctype.startswith("multipart/form-data"):
            return h._error(400, "Expected a multipart/form-data body", param="file")
        msg = email.parser.BytesParser(policy=email.policy.default).parsebytes(
            b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + raw)
        fields, content, filename = {}, None, None
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if name == "file":
                content, filename = part.get_payload(decode=True) or b"", part.get_filename() or "upload"
            elif name:
                fields[name] = (part.get_payload(decode=True) or b"").decode()
        if content is None:
            return h._error(400, "Missing required parameter: 'file'.", param="file")
        if fields.get("purpose") not in ("batch", "fine-tune", "assistants", "vision", "user_data", "evals"):
            return h._error(400, f"Invalid value for 'purpose': {fields.get('purpose')!r}.", param="purpose")
        with self._lock:
            fid = f"file-fake{next(self._ids):06d}"
            self.files[fid] = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                               "filename": filename, "purpose": fields["purpose"], "content": content}
        h._send(200, self._file_object(self.files[fid]))
        self._event("file_uploaded", file_id=fid, filename=filename)

    def _content(self, h, fid: str) -> None:
        f = self.files.get(fid)
        if f is None:
            return h._error(404, f"No such File object: {fid}")
        data = f["content"]
        h.send_response(200)
        h.send_header("Content-Type", "application/octet-stream")
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        half = len(data) // 2
        first = min(max(data.find(b"\n"), 0) // 2, half)  # part of the first line: no whole line yet
        try:
            h.wfile.write(data[:first])
            h.wfile.flush()
            self._event("content_started", file_id=fid)
            h.wfile.write(data[first:half])
            h.wfile.flush()
            self._event("content_half_sent", file_id=fid)
            h.wfile.write(data[half:])
            h.wfile.flush()
        except OSError:  # the client went away (killed mid-download)
            h.close_connection = True

    def add_file(self, content: bytes, filename: str, purpose: str = "batch_output") -> str:
        with self._lock:
            fid = f"file-fake{next(self._ids):06d}"
            self.files[fid] = {"id": fid, "object": "file", "bytes": len(content), "created_at": int(time.time()),
                               "filename": filename, "purpose": purpose, "content": content}
        return fid

    # ------------------------------------------------------------------ batches

    def _create(self, h, raw: bytes) -> None:
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            return h._error(400, "We could not parse the JSON body of your request.")
        fid = body.get("input_file_id")
        if fid not in self.files:
            return h._error(400, f"Invalid 'input_file_id': '{fid}'. No such file.", param="input_file_id")
        if body.get("endpoint") not in ("/v1/chat/completions", "/v1/embeddings", "/v1/completions",
                                        "/v1/responses"):
            return h._error(400, f"Invalid value for 'endpoint': {body.get('endpoint')!r}.", param="endpoint")
        if body.get("completion_window") != "24h":
            return h._error(400, "Invalid value for 'completion_window': only '24h' is supported.",
                            param="completion_window")
        now = int(time.time())
        with self._lock:
            bid = f"batch_fake{next(self._ids):06d}"
            batch = {"id": bid, "object": "batch", "endpoint": body["endpoint"], "errors": None,
                     "input_file_id": fid, "completion_window": "24h", "status": "validating",
                     "output_file_id": None, "error_file_id": None, "created_at": now, "in_progress_at": None,
                     "expires_at": now + 86400, "finalizing_at": None, "completed_at": None, "failed_at": None,
                     "expired_at": None, "cancelling_at": None, "cancelled_at": None,
                     "request_counts": {"total": 0, "completed": 0, "failed": 0},
                     "metadata": body.get("metadata")}
            self.batches[bid] = batch
            self.order.append(bid)
            self._state[bid] = {"retrieves": 0, "lines": None, "out": [], "err": [], "next": 0}
        h._send(200, batch)
        self._event("batch_created", batch_id=bid)

    def _list(self, h, query: dict) -> None:
        limit = int((query.get("limit") or ["20"])[0])
        after = (query.get("after") or [None])[0]
        ids = list(reversed(self.order))
        if after in ids:
            ids = ids[ids.index(after) + 1:]
        page = [self.batches[i] for i in ids[:limit]]
        h._send(200, {"object": "list", "data": page, "first_id": page[0]["id"] if page else None,
                      "last_id": page[-1]["id"] if page else None, "has_more": len(ids) > limit})

    def _retrieve(self, h, bid: str) -> None:
        batch = self.batches.get(bid)
        if batch is None:
            return h._error(404, f"No batch found with id '{bid}'.")
        st = self._state[bid]
        st["retrieves"] += 1
        self._event("batch_retrieved", batch_id=bid, retrieves=st["retrieves"], status=batch["status"])
        with self._lock:
            self._advance(batch, st)
        h._send(200, batch)

    def _cancel(self, h, bid: str) -> None:
        batch = self.batches.get(bid)
        if batch is None:
            return h._error(404, f"No batch found with id '{bid}'.")
        with self._lock:
            if batch["status"] in TERMINAL or batch["status"] == "cancelling":
                if batch["status"] != "cancelling":
                    return h._error(409, f"Cannot cancel a batch with status '{batch['status']}'.")
            else:
                batch["status"], batch["cancelling_at"] = "cancelling", int(time.time())
        h._send(200, batch)

    # ------------------------------------------------------------------ processing

    def _advance(self, batch: dict, st: dict) -> None:
        """One step of the batch's life, taken as it is retrieved."""
        now = int(time.time())
        status = batch["status"]
        if status == "validating":
            problem = self._validate(batch, st)
            if problem is not None:
                batch.update(status="failed", failed_at=now, errors={"object": "list", "data": [problem]})
                return
            batch.update(status="in_progress", in_progress_at=now)
            batch["request_counts"]["total"] = len(st["lines"])
            return
        if status == "in_progress":
            st["steps"] = st.get("steps", 0) + 1
            if self.expire_after is not None and st["steps"] > self.expire_after:
                self._close(batch, st, "expired", "batch_expired",
                            "This request could not be executed before the completion window expired.")
                return
            share = math.ceil(len(st["lines"]) / max(1, self.steps))
            self._answer_lines(batch, st, share)
            if st["next"] >= len(st["lines"]):
                batch.update(status="finalizing", finalizing_at=now)
            return
        if status == "finalizing":
            self._close(batch, st, "completed", None, None)
            return
        if status == "cancelling":
            self._close(batch, st, "cancelled", "batch_cancelled", "This request was not executed: the batch "
                                                                   "was cancelled.")

    def _validate(self, batch: dict, st: dict) -> dict | None:
        if self.fail_validation:
            return {"code": "invalid_request", "message": self.fail_validation, "param": None, "line": None}
        content = self.files[batch["input_file_id"]]["content"]
        if len(content) > self.max_bytes:
            return {"code": "file_too_large", "message": f"The input file is larger than {self.max_bytes} bytes.",
                    "param": None, "line": None}
        lines, seen = [], set()
        for n, text in enumerate(content.decode("utf-8", "replace").split("\n"), 1):
            if not text.strip():
                continue
            try:
                line = json.loads(text)
            except ValueError:
                return {"code": "invalid_json_line", "message": "This line is not parseable as valid JSON.",
                        "param": None, "line": n}
            cid = line.get("custom_id") if isinstance(line, dict) else None
            if not isinstance(cid, str) or not cid:
                return {"code": "missing_required_parameter", "message": "Missing required parameter: 'custom_id'.",
                        "param": "custom_id", "line": n}
            if cid in seen:
                return {"code": "duplicate_custom_id", "message": "The custom_id for this request is a duplicate "
                                                                  "of another request.", "param": "custom_id", "line": n}
            seen.add(cid)
            if line.get("method") != "POST" or line.get("url") != batch["endpoint"] or not isinstance(line.get("body"), dict):
                return {"code": "invalid_request", "message": f"The request's url must be {batch['endpoint']} with "
                                                              "method POST and a JSON body.", "param": "url", "line": n}
            lines.append(line)
        if not lines:
            return {"code": "empty_file", "message": "The batch input file is empty.", "param": None, "line": None}
        if len(lines) > self.max_requests:
            return {"code": "too_many_requests", "message": f"The batch has more than {self.max_requests} requests.",
                    "param": None, "line": None}
        st["lines"] = lines
        return None

    def _answer_lines(self, batch: dict, st: dict, k: int) -> None:
        for line in st["lines"][st["next"]:st["next"] + k]:
            cid, body = line["custom_id"], line["body"]
            fault = self.line_fault(cid, body) if self.line_fault else None
            cap = _Capture()
            self.lines.append({"custom_id": cid, **body})
            self.fake._answer(cap, body, {}, fault)
            rid = f"req_fake{next(self._ids):06d}"
            out = {"id": f"batch_req_fake{next(self._ids):06d}", "custom_id": cid,
                   "response": {"status_code": cap.status, "request_id": rid, "body": cap.payload}, "error": None}
            if cap.status == 200:
                st["out"].append(out)
                batch["request_counts"]["completed"] += 1
            else:
                st["err"].append(out)
                batch["request_counts"]["failed"] += 1
        st["next"] += k

    def _close(self, batch: dict, st: dict, status: str, code: str | None, message: str | None) -> None:
        now = int(time.time())
        for line in (st["lines"] or [])[st["next"]:]:
            st["err"].append({"id": f"batch_req_fake{next(self._ids):06d}", "custom_id": line["custom_id"],
                              "response": None, "error": {"code": code, "message": message}})
            batch["request_counts"]["failed"] += 1
        st["next"] = len(st["lines"] or [])
        rng = random.Random(f"{self.seed}|{batch['id']}")
        for key, name in (("out", "output_file_id"), ("err", "error_file_id")):
            lines = list(st[key])
            if lines:
                rng.shuffle(lines)
                data = "".join(json.dumps(x) + "\n" for x in lines).encode()
                batch[name] = self.add_file(data, f"{batch['id']}_{key}.jsonl")
        batch["status"] = status
        batch[{"completed": "completed_at", "expired": "expired_at", "cancelled": "cancelled_at"}[status]] = now
