"""Bearer tokens for the Kubernetes API of an EKS cluster, made from the caller's AWS credentials.

The token is what ``aws eks get-token`` prints: ``k8s-aws-v1.`` + base64url (no padding) of a presigned
STS ``GetCallerIdentity`` GET URL. The cluster name is signed in as the header ``x-k8s-aws-id`` so a token
for one cluster is refused by another; the API server's authenticator replays the URL to STS to learn the
IAM identity. EKS accepts a token for 15 minutes after it was signed (whatever ``X-Amz-Expires`` says);
:class:`EksTokenProvider` caches one and signs a new one after ``refresh_after`` seconds (default 10
minutes: 5 minutes of margin for clock skew and for requests still in flight when it is handed out).
"""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Callable
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, PartialCredentialsError

from spillway.errors import KubeAuthError

TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
URL_EXPIRES_SECONDS = 60
TOKEN_LIFETIME_SECONDS = 15 * 60
DEFAULT_REFRESH_AFTER_SECONDS = 10 * 60


class EksTokenProvider:
    """Signs EKS bearer tokens and caches one for ``refresh_after`` seconds. Thread-safe.

    ``token()`` is cheap while the cached token is fresh (no network call: presigning is local), so the
    Kubernetes client asks for it before every request.
    """

    def __init__(
        self,
        cluster_name: str,
        region: str,
        session: boto3.Session | None = None,
        clock: Callable[[], float] = time.time,
        *,
        refresh_after: float = DEFAULT_REFRESH_AFTER_SECONDS,
    ) -> None:
        if not 0 < refresh_after < TOKEN_LIFETIME_SECONDS:
            raise ValueError(f"refresh_after must be in (0, {TOKEN_LIFETIME_SECONDS}) seconds")
        self.cluster_name = cluster_name
        self.region = region
        self.refresh_after = refresh_after
        self._clock = clock
        self._lock = threading.Lock()
        self._token: str | None = None
        self._signed_at = 0.0
        self._sts = (session or boto3.Session()).client("sts", region_name=region)
        # Sign the cluster name in as a header: botocore fires this event for this operation only,
        # on this client only, just before it computes the SigV4 signature of the presigned URL.
        self._sts.meta.events.register("before-sign.sts.GetCallerIdentity", self._add_cluster_header)

    def token(self) -> str:
        """A token valid for at least ``15 min - refresh_after``; signs a new one when due."""
        with self._lock:
            now = self._clock()
            if self._token is None or now - self._signed_at >= self.refresh_after or now < self._signed_at:
                self._token = self._sign()
                self._signed_at = now
            return self._token

    def invalidate(self) -> None:
        """Forget the cached token (e.g. after a 401) so the next ``token()`` signs a new one."""
        with self._lock:
            self._token = None

    def _sign(self) -> str:
        try:
            url = self._sts.generate_presigned_url(
                "get_caller_identity", Params={}, ExpiresIn=URL_EXPIRES_SECONDS, HttpMethod="GET"
            )
        except (NoCredentialsError, PartialCredentialsError):
            raise KubeAuthError(
                f"EKS token for cluster {self.cluster_name!r}: no usable AWS credentials"
            ) from None
        except (BotoCoreError, ClientError) as exc:
            raise KubeAuthError(
                f"EKS token for cluster {self.cluster_name!r}: signing failed ({type(exc).__name__})"
            ) from None
        encoded = base64.urlsafe_b64encode(url.encode("utf-8")).decode("ascii").rstrip("=")
        return TOKEN_PREFIX + encoded

    def _add_cluster_header(self, request: Any, **_: Any) -> None:
        request.headers[CLUSTER_ID_HEADER] = self.cluster_name
