"""Keep credentials out of anything dagflow prints or writes.

dagflow never reads credentials itself (boto3 finds them through the standard chain), but an error
message from a library could quote a URL with user info or a header; every message about S3 that
dagflow shows goes through redact().
"""

from __future__ import annotations

import os
import re

SECRET_VARIABLES = ("AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN", "AWS_ACCESS_KEY_ID")
# user info runs to the last '@' before the path: a password may itself hold an '@'
_USERINFO = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*://)[^/\s]*@")
_SIGNATURE = re.compile(r"(?i)(X-Amz-(?:Signature|Credential|Security-Token)=)[^&\s]+")
_AUTH_HEADER = re.compile(r"(?i)(authorization['\"]?\s*[:=]\s*['\"]?)[^'\"\n]+")


def redact(text: str) -> str:
    for secret in (os.environ.get(name, "") for name in SECRET_VARIABLES):
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
    text = _USERINFO.sub(r"\g<scheme>***@", text)
    text = _SIGNATURE.sub(r"\g<1>***", text)
    return _AUTH_HEADER.sub(r"\g<1>***", text)
