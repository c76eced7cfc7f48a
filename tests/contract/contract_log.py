"""contract_log: appends one HTTP exchange to $PICKET_CONTRACT_LOG in the
format the C harness writes (harness_http), for the Python tests that talk
to picketd themselves; contract_responses and contract_exchanges_thirdparty
then hold their replies to proto/openapi.yaml too. Does nothing when the
variable is unset."""
import json
import os


def contract_log(method, path, data, status, hdrs, raw):
    """hdrs: the reply's headers with lower-case names; raw: its body text."""
    log = os.environ.get("PICKET_CONTRACT_LOG")
    if not log:
        return
    line = {"method": method, "path": path, "status": status,
            "content_type": hdrs.get("content-type", ""), "body": raw,
            "retry_after": hdrs.get("retry-after", ""), "allow": hdrs.get("allow", ""),
            "www_authenticate": hdrs.get("www-authenticate", ""),
            "request_body": data or "", "request_content_type": ""}
    with open(log, "a") as f:
        f.write(json.dumps(line) + "\n")
