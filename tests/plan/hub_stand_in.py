"""A small HTTP server on 127.0.0.1 that answers the Hub routes huggingface_hub calls for a model:
HEAD and GET (with Range) on /{repo}/resolve/{revision}/{file}, with the Hub's headers and error codes."""

import hashlib
import json
import struct
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ELEMENT_BYTES = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1, "I32": 4, "U8": 1, "I8": 1}


def safetensors_file(tensors: dict[str, tuple[str, list[int]]]) -> bytes:
    """A real safetensors file (zero-filled data) for {name: (dtype, shape)}."""
    header, offset = {}, 0
    for name, (dtype, shape) in tensors.items():
        size = ELEMENT_BYTES[dtype]
        for dim in shape:
            size *= dim
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + size]}
        offset += size
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    return struct.pack("<Q", len(encoded)) + encoded + bytes(offset)


@dataclass(frozen=True)
class HubError:
    status: int
    code: str  # the Hub's X-Error-Code header


class HubStandIn:
    """Repos: {repo_id: {filename: bytes}}; `gated` repos answer 401 GatedRepo without `token`."""

    def __init__(self, repos: dict[str, dict[str, bytes]], gated: dict[str, str] | None = None):
        self.repos, self.gated, self.requests = repos, gated or {}, []
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _handler(self):
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_HEAD(self):
                self._answer(body=False)

            def do_GET(self):
                self._answer(body=True)

            def _answer(self, body: bool):
                hub.requests.append((self.command, self.path))
                found = hub.lookup(self.path, self.headers.get("authorization", ""))
                if isinstance(found, HubError):
                    return self._error(found.status, found.code)
                data, commit = found
                start, end = self._range(len(data))
                self.send_response(206 if (start, end) != (0, len(data) - 1) else 200)
                self.send_header("X-Repo-Commit", commit)
                self.send_header("ETag", f'"{hashlib.sha256(data).hexdigest()}"')
                self.send_header("Content-Length", str(end - start + 1))
                self.end_headers()
                if body:
                    self.wfile.write(data[start : end + 1])

            def _range(self, size: int) -> tuple[int, int]:
                text = self.headers.get("range", "")
                if not text.startswith("bytes="):
                    return 0, size - 1
                first, _, last = text[6:].partition("-")
                return int(first), min(int(last) if last else size - 1, size - 1)

            def _error(self, status: int, code: str):
                self.send_response(status)
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", code)
                self.send_header("Content-Length", "0")
                self.end_headers()

        return Handler

    def lookup(self, path: str, authorization: str):
        """(bytes, commit) for a resolve URL, or the Hub's error for it."""
        parts = path.split("?")[0].strip("/").split("/")
        if len(parts) < 5 or parts[2] != "resolve":
            return HubError(404, "RepoNotFound")
        repo_id, filename = "/".join(parts[:2]), "/".join(parts[4:])
        if repo_id not in self.repos:
            return HubError(401, "RepoNotFound")
        if repo_id in self.gated and authorization != f"Bearer {self.gated[repo_id]}":
            return HubError(401, "GatedRepo")
        files = self.repos[repo_id]
        if filename not in files:
            return HubError(404, "EntryNotFound")
        return files[filename], hashlib.sha1(repo_id.encode()).hexdigest()
