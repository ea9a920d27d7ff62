"""EKS bearer tokens: what they decode to, how long they are cached, and the client that sends them."""

from __future__ import annotations

import base64
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3
import pytest
from moto import mock_aws

from spillway.adapters.eks_auth import TOKEN_PREFIX, EksTokenProvider
from spillway.adapters.kube import KubeClient, _ca_data
from spillway.errors import ConfigurationError, KubeAuthError


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def decode(token: str) -> str:
    assert token.startswith(TOKEN_PREFIX)
    body = token[len(TOKEN_PREFIX) :]
    assert "=" not in body, "base64url without padding"
    return base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)).decode()


@pytest.fixture
def aws() -> Iterator[boto3.Session]:
    with mock_aws():
        yield boto3.Session(region_name="us-east-1")


def test_token_is_a_presigned_get_caller_identity_url_with_the_cluster_signed_in(aws: boto3.Session) -> None:
    token = EksTokenProvider("prod", "eu-west-1", aws).token()
    url = urlsplit(decode(token))
    query = {k: v[0] for k, v in parse_qs(url.query).items()}

    assert url.scheme == "https"
    assert url.hostname is not None and url.hostname.startswith("sts.")
    assert query["Action"] == "GetCallerIdentity"
    assert query["Version"] == "2011-06-15"
    assert query["X-Amz-Expires"] == "60"
    assert query["X-Amz-Algorithm"] == "AWS4-HMAC-SHA256"
    assert "/eu-west-1/sts/aws4_request" in query["X-Amz-Credential"]
    assert query["X-Amz-SignedHeaders"].split(";") == ["host", "x-k8s-aws-id"]
    assert len(query["X-Amz-Signature"]) == 64


def test_the_cluster_name_changes_the_signature(aws: boto3.Session) -> None:
    """The header is really signed: same credentials and time, other cluster → other signature."""

    def signature(cluster: str) -> str:
        return parse_qs(urlsplit(decode(EksTokenProvider(cluster, "us-east-1", aws).token())).query)[
            "X-Amz-Signature"
        ][0]

    assert signature("a") != signature("b")


def test_token_is_cached_within_its_lifetime_and_resigned_after(aws: boto3.Session) -> None:
    clock = Clock()
    provider = EksTokenProvider("prod", "us-east-1", aws, clock=clock)
    signed: list[str] = []
    original = provider._sign

    def counting_sign() -> str:
        signed.append("x")
        # botocore stamps X-Amz-Date to the second: make each signature distinct regardless
        return original() + str(len(signed))

    provider._sign = counting_sign  # type: ignore[method-assign]

    first = provider.token()
    clock.now += 9 * 60 + 59
    assert provider.token() == first
    assert len(signed) == 1

    clock.now += 1  # 10 minutes: refresh, well before EKS stops accepting it at 15
    second = provider.token()
    assert second != first
    assert len(signed) == 2
    clock.now += 60
    assert provider.token() == second

    provider.invalidate()
    assert provider.token() != second
    assert len(signed) == 3


def test_token_is_signed_once_under_concurrent_callers(aws: boto3.Session) -> None:
    provider = EksTokenProvider("prod", "us-east-1", aws, clock=Clock())
    calls = 0
    original = provider._sign
    gate = threading.Barrier(8)

    def slow_sign() -> str:
        nonlocal calls
        calls += 1
        time.sleep(0.05)  # without the lock, every waiting thread would sign its own
        return original()

    provider._sign = slow_sign  # type: ignore[method-assign]
    tokens: list[str] = []

    def worker() -> None:
        gate.wait()
        tokens.append(provider.token())

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert calls == 1
    assert len(set(tokens)) == 1


def test_refresh_window_must_be_inside_the_token_lifetime(aws: boto3.Session) -> None:
    with pytest.raises(ValueError):
        EksTokenProvider("prod", "us-east-1", aws, refresh_after=15 * 60)


def test_missing_credentials_are_an_auth_error_without_secrets(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SECURITY_TOKEN", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    for name in ("AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE"):
        monkeypatch.setenv(name, "/dev/null")
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    provider = EksTokenProvider("prod", "us-east-1", boto3.Session(region_name="us-east-1"))
    with pytest.raises(KubeAuthError, match=r"prod.*credentials"):
        provider.token()


# --- KubeClient.from_eks ---------------------------------------------------------------------------


def make_cluster(session: boto3.Session, name: str = "prod") -> dict[str, Any]:
    eks = session.client("eks", region_name="us-east-1")
    eks.create_cluster(
        name=name,
        roleArn="arn:aws:iam::123456789012:role/eks",
        resourcesVpcConfig={"subnetIds": []},
    )
    return dict(eks.describe_cluster(name=name)["cluster"])


def test_from_eks_uses_the_describe_cluster_endpoint_ca_and_an_eks_token(aws: boto3.Session) -> None:
    cluster = make_cluster(aws)
    clock = Clock()
    provider = EksTokenProvider("prod", "us-east-1", aws, clock=clock)

    kube = KubeClient.from_eks("prod", "us-east-1", aws, token_provider=provider)

    cfg = kube.api_client.configuration
    assert cfg.host == cluster["endpoint"].rstrip("/")
    ca = cfg.ca_cert_data
    ca_bytes = ca.encode("ascii") if isinstance(ca, str) else ca
    assert ca_bytes == base64.b64decode(cluster["certificateAuthority"]["data"])  # in memory, no temp file
    assert cfg.retries is False
    header = cfg.auth_settings()["BearerToken"]["value"]
    assert header == f"Bearer {provider.token()}"
    assert decode(header.removeprefix("Bearer ")).startswith("https://sts.")

    # Every request asks again, so a re-signed token is picked up without rebuilding the client.
    provider._sign = lambda: "k8s-aws-v1.resigned"  # type: ignore[method-assign]
    clock.now += 5 * 60
    assert cfg.auth_settings()["BearerToken"]["value"] == header
    clock.now += 6 * 60
    assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer k8s-aws-v1.resigned"


def test_eks_ca_data_becomes_pem_text_for_ssl() -> None:
    pem = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
    assert _ca_data(base64.b64encode(pem.encode()).decode(), "c") == pem
    with pytest.raises(ConfigurationError, match="not base64"):
        _ca_data("not base64!", "c")


def test_from_eks_default_token_provider_signs_for_that_cluster(aws: boto3.Session) -> None:
    make_cluster(aws, "batch")
    kube = KubeClient.from_eks("batch", "us-east-1", aws)
    header = kube.api_client.configuration.auth_settings()["BearerToken"]["value"]
    assert (
        "x-k8s-aws-id"
        in parse_qs(urlsplit(decode(header.removeprefix("Bearer "))).query)["X-Amz-SignedHeaders"][0]
    )


def test_from_eks_unknown_cluster_is_a_configuration_error(aws: boto3.Session) -> None:
    with pytest.raises(ConfigurationError, match=r"'missing'.*not found"):
        KubeClient.from_eks("missing", "us-east-1", aws)


# --- KubeClient.from_kubeconfig / from_secret ------------------------------------------------------

KUBECONFIG = """
apiVersion: v1
kind: Config
current-context: lab
clusters:
- name: lab
  cluster:
    server: https://k8s.lab.example:6443/
    insecure-skip-tls-verify: true
contexts:
- name: lab
  context: {cluster: lab, user: robot}
users:
- name: robot
  user: {token: s3cr3t-token-value}
"""


def test_from_kubeconfig_loads_into_its_own_configuration() -> None:
    from kubernetes.client.configuration import Configuration

    before = Configuration._default
    kube = KubeClient.from_kubeconfig(KUBECONFIG, request_timeout=3)
    cfg = kube.api_client.configuration
    assert cfg.host == "https://k8s.lab.example:6443"
    assert cfg.verify_ssl is False
    assert cfg.auth_settings()["BearerToken"]["value"] == "Bearer s3cr3t-token-value"
    assert kube.request_timeout == 3
    assert Configuration._default is before, "the global default configuration must stay untouched"


def test_bad_kubeconfig_errors_name_no_secret() -> None:
    broken = KUBECONFIG.replace("current-context: lab", "current-context: nope")
    with pytest.raises(ConfigurationError) as err:
        KubeClient.from_kubeconfig(broken)
    assert "s3cr3t" not in str(err.value)

    with pytest.raises(ConfigurationError, match="not valid YAML") as err:
        KubeClient.from_kubeconfig("users: [ {token: s3cr3t-token-value")
    assert "s3cr3t" not in str(err.value)


def test_from_secret_reads_a_kubeconfig_from_secrets_manager(aws: boto3.Session) -> None:
    sm = aws.client("secretsmanager", region_name="us-east-1")
    sm.create_secret(Name="spillway/kubeconfig", SecretString=KUBECONFIG)
    kube = KubeClient.from_secret("spillway/kubeconfig", aws)
    assert kube.api_client.configuration.host == "https://k8s.lab.example:6443"

    import json

    sm.create_secret(Name="spillway/wrapped", SecretString=json.dumps({"kubeconfig": KUBECONFIG}))
    assert KubeClient.from_secret("spillway/wrapped", aws).api_client.configuration.host.endswith(":6443")

    with pytest.raises(ConfigurationError, match=r"'nope'.*not found"):
        KubeClient.from_secret("nope", aws)
