"""tenant_http: the one HTTP call the hostile-tenant suite's scripts make
(tests/tenant/test_*.py): a request to a local picketd as a token."""
import http.client
import json


def request(port, method, path, token, body=None):
    """One request to 127.0.0.1:port as `token` (Bearer), with body sent as
    JSON when given: (status, the reply's JSON or its text, headers)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    headers = {"Authorization": "Bearer " + token}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
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
