"""Request signing for the clouds' APIs: Alibaba RPC (HMAC-SHA1), Tencent TC3
(HMAC-SHA256), Huawei APIG AK/SK (SDK-HMAC-SHA256) and Oracle Cloud's RSA-SHA256 HTTP
signature (the RSA itself through `cryptography`).

Implemented from the providers' published algorithms rather than through their SDKs: each
SDK core pulls in its own HTTP stack (requests, urllib3, six, ...) for a function of twenty
lines, and the spiders need only the headers or query parameters. Every signer is tested
against the worked example its provider publishes, OCI's by verifying with the public key
(in that provider's test module).
Secrets only ever enter an HMAC or an RSA signature; nothing here logs or returns them.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import uuid
from collections.abc import Mapping
from datetime import UTC, datetime
from email.utils import format_datetime
from urllib.parse import quote, unquote, urlsplit

from gpuradar.core.clock import SYSTEM


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _hmac256(key: bytes, msg: str) -> bytes:
    return hmac.new(key, msg.encode("utf-8"), hashlib.sha256).digest()


# -- Alibaba Cloud: RPC signature, version 1.0 ------------------------------------------------
def alibaba_percent_encode(value: str) -> str:
    """RFC 3986 encoding as Alibaba's RPC signature wants it ('~' kept, space as %20)."""
    return quote(str(value), safe="~")


def alibaba_string_to_sign(method: str, params: Mapping[str, str]) -> str:
    canonical = "&".join(f"{alibaba_percent_encode(k)}={alibaba_percent_encode(v)}"
                         for k, v in sorted(params.items()))
    return f"{method.upper()}&%2F&{alibaba_percent_encode(canonical)}"


def alibaba_rpc_signature(method: str, params: Mapping[str, str], secret: str) -> str:
    """Base64(HMAC-SHA1(secret + '&', StringToSign)) over the sorted, encoded parameters."""
    digest = hmac.new(f"{secret}&".encode(), alibaba_string_to_sign(method, params).encode(),
                      hashlib.sha1).digest()
    return base64.b64encode(digest).decode()


def alibaba_rpc_params(action: str, params: Mapping[str, str], access_key_id: str,
                       secret: str, *, version: str = "2014-05-26", method: str = "POST",
                       now: datetime | None = None, nonce: str | None = None) -> dict[str, str]:
    """The full, signed query of one RPC call (common parameters added), as Alibaba's own
    OpenAPI core sends it with the HMAC-SHA1 signature: POST, everything in the query."""
    now = now or SYSTEM.now()
    query = {
        "Action": action, "Version": version, "Format": "json",
        "AccessKeyId": access_key_id, "SignatureMethod": "HMAC-SHA1",
        "SignatureVersion": "1.0", "SignatureNonce": nonce or uuid.uuid4().hex,
        "Timestamp": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        **{k: str(v) for k, v in params.items()},
    }
    query["Signature"] = alibaba_rpc_signature(method, query, secret)
    return query


# -- Tencent Cloud: TC3-HMAC-SHA256 -----------------------------------------------------------
# The content type Tencent's SDK sends (and signs) with a JSON body.
TC3_CONTENT_TYPE = "application/json"


def tencent_tc3_headers(*, secret_id: str, secret_key: str, service: str, host: str,
                        action: str, version: str, region: str | None, payload: str,
                        timestamp: int, content_type: str = TC3_CONTENT_TYPE
                        ) -> dict[str, str]:
    """Headers of a signed API 3.0 POST (JSON body), signing content-type and host."""
    day = datetime.fromtimestamp(timestamp, UTC).strftime("%Y-%m-%d")
    canonical = "\n".join([
        "POST", "/", "", f"content-type:{content_type}\nhost:{host}\n",
        "content-type;host", _sha256_hex(payload.encode("utf-8"))])
    scope = f"{day}/{service}/tc3_request"
    to_sign = "\n".join(["TC3-HMAC-SHA256", str(timestamp), scope,
                         _sha256_hex(canonical.encode("utf-8"))])
    key = _hmac256(_hmac256(_hmac256(f"TC3{secret_key}".encode(), day), service),
                   "tc3_request")
    signature = hmac.new(key, to_sign.encode("utf-8"), hashlib.sha256).hexdigest()
    headers = {
        "Authorization": (f"TC3-HMAC-SHA256 Credential={secret_id}/{scope}, "
                          f"SignedHeaders=content-type;host, Signature={signature}"),
        "Content-Type": content_type, "Host": host, "X-TC-Action": action,
        "X-TC-Timestamp": str(timestamp), "X-TC-Version": version,
    }
    if region:
        headers["X-TC-Region"] = region
    return headers


# -- Huawei Cloud: APIG AK/SK, SDK-HMAC-SHA256 ------------------------------------------------
def _huawei_encode(value: str) -> str:
    return quote(value, safe="-_.~")


def huawei_canonical_request(method: str, url: str, headers: Mapping[str, str],
                             body: bytes) -> tuple[str, str]:
    """(canonical request, signed header names) of Huawei's AK/SK algorithm."""
    parts = urlsplit(url)
    path = "/".join(_huawei_encode(seg) for seg in parts.path.split("/"))
    if not path.endswith("/"):
        path += "/"
    pairs: list[tuple[str, str]] = []
    for item in parts.query.split("&") if parts.query else []:
        k, _, v = item.partition("=")
        pairs.append((_huawei_encode(unquote(k)), _huawei_encode(unquote(v))))
    query = "&".join(f"{k}={v}" for k, v in sorted(pairs))
    lowered = {k.lower(): v.strip() for k, v in headers.items()}
    signed = sorted(lowered)
    canonical_headers = "".join(f"{k}:{lowered[k]}\n" for k in signed)
    signed_names = ";".join(signed)
    return ("\n".join([method.upper(), path, query, canonical_headers, signed_names,
                       _sha256_hex(body)]), signed_names)


def huawei_sign(*, access_key: str, secret_key: str, method: str, url: str,
                headers: Mapping[str, str], body: bytes = b"",
                now: datetime | None = None) -> dict[str, str]:
    """`headers` plus X-Sdk-Date, Host and the Authorization header."""
    parts = urlsplit(url)
    out = dict(headers)
    out.setdefault("X-Sdk-Date", (now or SYSTEM.now()).strftime("%Y%m%dT%H%M%SZ"))
    out.setdefault("Host", parts.netloc)
    canonical, signed = huawei_canonical_request(method, url, out, body)
    to_sign = "\n".join(["SDK-HMAC-SHA256", out["X-Sdk-Date"],
                         _sha256_hex(canonical.encode("utf-8"))])
    signature = hmac.new(secret_key.encode(), to_sign.encode(), hashlib.sha256).hexdigest()
    out["Authorization"] = (f"SDK-HMAC-SHA256 Access={access_key}, SignedHeaders={signed}, "
                            f"Signature={signature}")
    return out


# -- credentials ------------------------------------------------------------------------------
REPLAY_PLACEHOLDER = "replay-placeholder"


def signing_credentials(spider, names: tuple[str, ...]) -> dict[str, str] | None:
    """The spider's credential options `names`, or None when one is missing.

    A crawl replayed from a recording (`--replay`, `gpuradar demo`) never reaches the
    provider, so placeholders sign its requests: a recording made with real keys replays
    without them, and the keys never need to be stored with it."""
    values = {n: spider.option(n) for n in names}
    if all(values.values()):
        return {n: str(v) for n, v in values.items()}
    if spider.settings.get("GPURADAR_REPLAY_DIR"):
        return {n: str(v or REPLAY_PLACEHOLDER) for n, v in values.items()}
    return None


# -- Oracle Cloud: draft-cavage HTTP signature, RSA-SHA256 ------------------------------------
# The headers the `oci` SDK's Signer signs on a request without a body (oci/signer.py).
OCI_SIGNED_HEADERS = ("date", "(request-target)", "host")


def oci_signing_string(method: str, url: str, date: str) -> str:
    """The text an OCI API key signs: `name: value` lines of OCI_SIGNED_HEADERS, the request
    target being the lowercased method and the path with its query, exactly as sent."""
    parts = urlsplit(url)
    target = parts.path + (f"?{parts.query}" if parts.query else "")
    values = {"date": date, "(request-target)": f"{method.lower()} {target}",
              "host": parts.netloc}
    return "\n".join(f"{name}: {values[name]}" for name in OCI_SIGNED_HEADERS)


def oci_headers(*, method: str, url: str, tenancy: str, user: str, fingerprint: str,
                private_key_pem: bytes, pass_phrase: str | None = None,
                now: datetime | None = None) -> dict[str, str]:
    """Headers of a bodiless request signed as the `oci` SDK signs it: keyId
    '<tenancy>/<user>/<fingerprint>', RSA-SHA256 (PKCS#1 v1.5) through `cryptography`."""
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import padding, rsa

    key = serialization.load_pem_private_key(
        private_key_pem, pass_phrase.encode() if pass_phrase else None)
    if not isinstance(key, rsa.RSAPrivateKey):
        raise ValueError("the OCI API key is not an RSA private key")
    date = format_datetime(now or SYSTEM.now(), usegmt=True)
    signature = key.sign(oci_signing_string(method, url, date).encode(), padding.PKCS1v15(),
                         hashes.SHA256())
    return {
        "date": date, "host": urlsplit(url).netloc,
        "authorization": (
            f'Signature version="1",keyId="{tenancy}/{user}/{fingerprint}",'
            f'algorithm="rsa-sha256",headers="{" ".join(OCI_SIGNED_HEADERS)}",'
            f'signature="{base64.b64encode(signature).decode()}"'),
    }
