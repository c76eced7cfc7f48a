"""tenant_http: the HTTP calls the hostile-tenant suite's scripts make
(tests/tenant/test_*.py): a request to a local picketd as a token, one
sent in the background, and an event stream read an event at a time."""
import http.client
import json
import threading


def request(port, method, path, token, body=None, timeout=60):
    """One request to 127.0.0.1:port as `token` (Bearer), with body sent as
    JSON (UTF-8) when given: (status, the reply's JSON or its text,
    headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    headers = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body, ensure_ascii=False).encode()
        headers["Content-Type"] = "application/json"
    conn.request(method, path, body=data, headers=headers)
    r = conn.getresponse()
    raw = r.read().decode()
    conn.close()
    try:
        doc = json.loads(raw)
    except ValueError:
        doc = raw
    return r.status, doc, dict(r.getheaders())


def code(doc):
    """The error code of a reply's JSON (None when it is not an error)."""
    return doc.get("error", {}).get("code") if isinstance(doc, dict) else None


class Pending(threading.Thread):
    """request() in a thread of its own (a waiting acquire): join() it,
    then .result is request()'s answer (None if it raised)."""

    def __init__(self, *args, **kwargs):
        super().__init__(daemon=True)
        self.args_, self.kwargs_, self.result = args, kwargs, None
        self.start()

    def run(self):
        self.result = request(*self.args_, **self.kwargs_)


class Stream:
    """GET of an event stream (/v1/locks/NAME/events,
    /v1/elections/NAME/observe) as `token`: .status, and when it is 200
    the events an event at a time; .raw holds every byte read, to search
    for names; a refusal's JSON is .doc."""

    def __init__(self, port, path, token, timeout=30):
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        self.conn.request("GET", path, headers={"Authorization": "Bearer " + token})
        self.resp = self.conn.getresponse()
        self.status, self.raw, self.doc = self.resp.status, "", None
        if self.status != 200:
            text = self.resp.read().decode()
            try:
                self.doc = json.loads(text)
            except ValueError:
                self.doc = text
            self.conn.close()

    def next(self):
        """The next event but heartbeats: (type, data); (None, None) when
        the stream ended."""
        while True:
            typ, data = None, None
            while True:
                line = self.resp.readline().decode()
                if line == "":
                    return None, None
                self.raw += line
                line = line.rstrip("\n")
                if line == "":
                    break
                if line.startswith("event: "):
                    typ = line[7:]
                elif line.startswith("data: "):
                    data = json.loads(line[6:])
            if typ and typ != "heartbeat":
                return typ, data

    def until(self, want, within=20):
        """The data of the next `want` event among the next `within`
        events, or None."""
        for _ in range(within):
            typ, data = self.next()
            if typ == want:
                return data
            if typ is None:
                return None
        return None

    def close(self):
        self.conn.close()
