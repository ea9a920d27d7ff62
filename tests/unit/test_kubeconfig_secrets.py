"""The credentials of a kubeconfig's users that logs are kept clear of by value
(:func:`spillway.adapters.kube.kubeconfig_secrets`): an exec plugin's arguments carry some (Azure's
kubelogin ``--client-secret``, int128/kubelogin's ``--oidc-client-secret=...``) beside settings every line
may name (a region, a cluster's name, a role's ARN), which must stay readable."""

from __future__ import annotations

from typing import Any

from spillway.adapters.kube import kubeconfig_secrets


def _exec_user(args: list[str], command: str = "kubelogin") -> dict[str, Any]:
    return {
        "users": [
            {
                "name": "u",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": command,
                        "args": args,
                    }
                },
            }
        ]
    }


def _words_only(monkeypatch: Any) -> Any:
    """observability with no secret known yet; what a test adds is gone after it."""
    from spillway import observability

    monkeypatch.setattr(observability, "_known", frozenset())
    monkeypatch.setattr(observability, "_known_pattern", None)
    monkeypatch.setattr(observability, "_words", frozenset())
    monkeypatch.setattr(observability, "_words_pattern", None)
    return observability


def test_a_secret_an_exec_plugin_is_given_as_a_flags_next_argument_is_a_secret() -> None:
    """Azure kubelogin's service principal login, as `kubelogin convert-kubeconfig -l spn` writes it."""
    secret = "Qx8Q~kS0mEcl1entSecretValue.abc"
    args = ["get-token", "--login", "spn", "--environment", "AzurePublicCloud",
            "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630",
            "--client-id", "0b5c1e1c-1111-2222-3333-444455556666",
            "--client-secret", secret, "--tenant-id", "72f988bf-86f1-41af-91ab-2d7cd011db47"]  # fmt: skip
    assert kubeconfig_secrets(_exec_user(args)) == [secret]


def test_a_secret_given_as_flag_equals_value_is_a_secret() -> None:
    """int128/kubelogin (kubectl oidc-login), as its setup prints the user."""
    secret = "YAeeM2ptWNAa5aKqhbZKJg"
    token = "ghp_" + "x" * 36
    args = ["oidc-login", "get-token", "--oidc-issuer-url=https://accounts.google.com",
            "--oidc-client-id=32934980234312.apps.googleusercontent.com",
            f"--oidc-client-secret={secret}", f"-token={token}", "--token-cache-dir=/tmp/kube/cache"]  # fmt: skip
    assert kubeconfig_secrets(_exec_user(args, "kubectl")) == [secret, token]


def test_the_aws_and_gke_plugins_arguments_hold_no_secret() -> None:
    """`aws eks update-kubeconfig` (aws eks get-token), eksctl's aws-iam-authenticator user (whose
    subcommand is the word ``token``: no flag, so the next argument is not taken), gke-gcloud-auth-plugin
    and kubelogin's boolean ``--token-only``-like flags: a region, a cluster's name, a role's ARN, a path
    are no secret, and blanking one by value would blank it from every line."""
    aws_cli = ["--region", "eu-west-1", "eks", "get-token", "--cluster-name", "ml-training",
               "--output", "json", "--role-arn", "arn:aws:iam::123456789012:role/eks-admin"]  # fmt: skip
    authenticator = ["token", "-i", "ml-training", "--region", "eu-west-1",
                     "-r", "arn:aws:iam::123456789012:role/eks-admin"]  # fmt: skip
    gke = ["--use_application_default_credentials"]
    kubelogin = ["get-token", "--use-azurerm-env-vars", "--token-cache-dir", "/home/u/.kube/cache/kubelogin",
                 "--login", "workloadidentity", "--password-stdin", "--server-id", "6dae42f8"]  # fmt: skip
    for args in (aws_cli, authenticator, gke, kubelogin):
        assert kubeconfig_secrets(_exec_user(args)) == [], args


def test_an_auth_providers_command_arguments_are_read_as_well() -> None:
    """The gcp auth-provider's ``cmd-args`` is one string of arguments."""
    token = "ya29.a0AfH6SMBx" + "y" * 20
    doc = {"users": [{"name": "g", "user": {"auth-provider": {"name": "gcp", "config": {
        "cmd-path": "/usr/bin/helper", "cmd-args": f"config config-helper --format=json --access-token {token}",
    }}}}]}  # fmt: skip
    assert kubeconfig_secrets(doc) == [token]


def test_a_camel_case_flags_secret_is_a_secret() -> None:
    """Flags spelled in camelCase (Go's flag package takes any spelling: ``-clientSecret``, ``--apiKey``,
    ``--accessToken=``) end in the same words, as ``-client-secret`` does."""
    secret, key, token = "Qx8Q~camelCaseSecret.abc", "AIzaSyCamelCaseApiKey0123", "eyJhbGciOiJSUzI1NiJ9.camel"
    args = ["get-token", "-clientSecret", secret, f"--apiKey={key}", "--accessToken", token,
            "--clientId", "0b5c1e1c-1111-2222-3333-444455556666", "--tokenCacheDir", "/home/u/.kube/cache"]  # fmt: skip
    assert kubeconfig_secrets(_exec_user(args)) == [secret, key, token]


def test_a_secret_in_a_shell_command_line_is_a_secret() -> None:
    """A plugin run through a shell (``command: sh``, ``args: [-c, "kubelogin get-token ... --client-secret
    <secret>"]``) gives its whole command line as one argument: its words are read as arguments too."""
    secret = "Qx8Q~kS0mEcl1entSecretValue.abc"
    script = f"exec kubelogin get-token --login spn --server-id 6dae42f8 --client-secret '{secret}' --region eu-west-1"
    assert kubeconfig_secrets(_exec_user(["-c", script], "sh")) == [secret]


def test_a_secret_given_as_a_key_value_argument_is_a_secret() -> None:
    """``vault login -method=userpass username=ml password=<secret>``: Vault's auth methods take their
    fields as ``key=value`` arguments; a key ending in a secret's word gives a secret, another does not."""
    password = "correct-horse-battery-staple"
    args = ["login", "-method=userpass", "-address=https://vault.example.com:8200", "username=ml-training",
            f"password={password}", "-field=token"]  # fmt: skip
    assert kubeconfig_secrets(_exec_user(args, "vault")) == [password]


def test_a_short_flag_is_a_secret_only_for_the_plugin_whose_flag_takes_one() -> None:
    """doctl's global ``-t`` is ``--access-token`` (DigitalOcean's doctl reference, Global Flags), given
    apart or joined as pflag reads a shorthand (``-t<value>``, ``-t=<value>``); it is read so in a shell
    line running doctl too. Azure kubelogin's ``-t`` is ``--tenant-id`` (and ``-l`` ``--login``, ``-e``
    ``--environment``), aws-iam-authenticator's ``-i`` ``--cluster-id`` and ``-r`` ``--role``: no secret."""
    token = "dop_v1_" + "a1" * 32
    doctl = ["kubernetes", "cluster", "kubeconfig", "exec-credential", "--version=v1beta1", "-t", token,
             "--context=default", "8d2bd1b8-0c1a-4a0b-9a38-ef9a1b5c6d7e"]  # fmt: skip
    assert kubeconfig_secrets(_exec_user(doctl, "/usr/local/bin/doctl")) == [token]
    assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", f"-t{token}"], "doctl")) == [token]
    assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", f"-t={token}"], "doctl")) == [token]
    script = f"exec doctl kubernetes cluster kubeconfig exec-credential -t {token} --context=default"
    assert kubeconfig_secrets(_exec_user(["-c", script], "sh")) == [token]
    kubelogin = ["get-token", "-l", "spn", "-e", "AzurePublicCloud", "-t", "72f988bf-86f1-41af-91ab-2d7cd011db47",
                 "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"]  # fmt: skip
    authenticator = ["token", "-i", "ml-training", "-r", "arn:aws:iam::123456789012:role/eks-admin"]
    assert kubeconfig_secrets(_exec_user(kubelogin, "kubelogin")) == []
    assert kubeconfig_secrets(_exec_user(authenticator, "aws-iam-authenticator")) == []


def test_an_arguments_short_secret_is_blanked_where_it_stands_as_a_word_and_nowhere_else(
    monkeypatch: Any,
) -> None:
    """A secret a flag names is blanked whatever its length (``--password hunter2``: 7 characters, under
    the length below which a value is no longer blanked inside other words), but only where it stands
    as a word of its own: inside a region, an ARN or a longer word it is left, so lines stay readable."""
    from spillway.adapters.kube import kubeconfig_argument_secrets

    observability = _words_only(monkeypatch)  # _words too: a word left there is blanked in later tests
    found = kubeconfig_argument_secrets(_exec_user(["get-token", "--password", "east", "-x"]))
    assert found == ["east"]
    observability.add_secret_words(found)
    assert observability.redact("login --password east refused") == "login --password <redacted> refused"
    assert observability.redact('{"password":"east"}') == '{"password":"<redacted>"}'
    line = "raised gpu-a in us-east-1 (arn:aws:autoscaling:us-east-1:1:group/east-1), eastern, beast"
    assert observability.redact(line) == line


def test_a_short_secret_ending_a_sentence_or_a_clause_is_blanked_still(monkeypatch: Any) -> None:
    """A plugin's error text (the kubernetes client logs its stderr whole: ``exec: process returned 1.
    <stderr>``) puts a full stop, a colon or a comma after a word as readily as a space: the word stands
    alone all the same and is blanked, as one a repr or JSON escapes a line break before (``\\npw1``).
    Followed by more of a name (``pw1.example.com``, ``pw1:8080``, ``pw1-2``) it is part of that name."""
    observability = _words_only(monkeypatch)
    observability.add_secret_words(["pw1"])

    for line in ("password pw1.", "password pw1. Try again", "token pw1: rejected", "got pw1;", "x pw1-",
                 "'refused\\npw1 for ml'", '"refused\\tpw1"'):  # fmt: skip
        assert "pw1" not in observability.redact(line), line
    for line in ("pw1.example.com", "host pw1:8080", "pw1-2 raised", "arn:aws:iam::1:role/pw1", "us-pw1-1"):
        assert observability.redact(line) == line


def test_a_switchs_value_or_stdins_dash_is_no_secret(monkeypatch: Any) -> None:
    """int128/kubelogin's ``--oidc-use-access-token`` is a switch (a pflag bool: its value is one Go's
    strconv.ParseBool reads, ``true``, ``1``, ``t``...), and ``-`` is a value read from stdin (Vault's
    ``token=-``): none is a credential, and blanking one wherever it stands as a word would take every
    ``true``, ``1`` or `` - `` out of the logs (``raised gpu-a from 1 to 3``)."""
    observability = _words_only(monkeypatch)
    for value in ("true", "True", "FALSE", "1", "0", "t", "f"):
        args = [
            "get-token",
            "--oidc-issuer-url=https://issuer.example.com",
            f"--oidc-use-access-token={value}",
        ]
        assert kubeconfig_secrets(_exec_user(args, "kubectl-oidc_login")) == [], value
    assert kubeconfig_secrets(_exec_user(["login", "-method=token", "token=-"], "vault")) == []
    assert kubeconfig_secrets(_exec_user(["--password", "truest1"])) == ["truest1"]  # a word, not a switch's

    from spillway.adapters.kube import kubeconfig_argument_secrets

    observability.add_secret_words(
        kubeconfig_argument_secrets(_exec_user(["get-token", "--oidc-use-access-token=1", "--password=-"]))
    )
    line = "raised gpu-a from 1 to 3 - done: true"
    assert observability.redact(line) == line


def test_a_short_flags_joined_value_is_read_whatever_characters_it_holds() -> None:
    """pflag reads ``-t<value>`` as ``-t`` given the rest of the argument, whatever characters it holds
    (a token may carry ``+``, ``/``, ``=``, ``~``, which no flag's name does)."""
    token = "ab+c/d~e=="
    assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", f"-t{token}"], "doctl")) == [token]
    script = f"/usr/local/bin/doctl kubernetes cluster kubeconfig exec-credential -t{token} ml"
    assert kubeconfig_secrets(_exec_user(["-c", script], "sh")) == [token]


def test_a_short_secret_flag_combined_after_switches_is_read_as_pflag_reads_the_group() -> None:
    """pflag reads ``-vt <value>`` and ``-vt<value>`` as ``-v`` (doctl's ``--verbose``, a switch) then
    ``-t`` given the next argument or the rest of the group (parseShortArg walks the letters of one
    argument; a letter with a value, ``-o`` ``--output``, ``-c`` ``--config``, ``-u`` ``--api-url``,
    takes the rest for its own, so the letters after it are no flags)."""
    token = "dop_v1_" + "c3" * 32
    for args in (["-vt", token], [f"-vt{token}"], [f"-vt={token}"], ["-hvt", token]):
        assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", *args], "doctl")) == [token], args
    script = f"exec doctl kubernetes cluster kubeconfig exec-credential -vt {token} ml"
    assert kubeconfig_secrets(_exec_user(["-c", script], "sh")) == [token]
    # -o's value is "text", -c's a path, -u's a URL: no t among their letters is a flag
    for args in (
        ["-otext"],
        ["-c/home/u/.config/doctl/config.yaml"],
        ["-uhttps://api.example.test"],
        ["-v=true"],
    ):
        assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", *args, "ml"], "doctl")) == [], args


def test_a_secret_flag_takes_the_next_argument_even_one_starting_with_a_dash(monkeypatch: Any) -> None:
    """pflag (and Go's flag package) gives a flag that is no switch the next argument whatever it holds
    (parseLongArg, parseSingleShortArg: ``value = args[0]``), so a secret starting with ``-`` is the
    flag's value; a switch whose name ends in a secret's word (int128/kubelogin's
    ``--oidc-use-access-token``, a BoolVar) takes none, and the flag after it is no secret."""
    secret = "-Qx8Q~leadingDashSecret.abc"
    token = "-dop_v1_" + "d4" * 32
    spn = ["get-token", "--client-secret", secret, "--login", "spn"]
    assert kubeconfig_secrets(_exec_user(spn)) == [secret]
    assert kubeconfig_secrets(_exec_user(["get-token", "-clientSecret", secret])) == [secret]
    assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", "-t", token, "ml"], "doctl")) == [token]
    assert kubeconfig_secrets(_exec_user(["kubernetes", "cluster", "-vt", token, "ml"], "doctl")) == [token]
    switch = ["oidc-login", "get-token", "--oidc-use-access-token", "--oidc-issuer-url=https://issuer.example.com",
              "--oidc-client-id=kubernetes"]  # fmt: skip
    assert kubeconfig_secrets(_exec_user(switch, "kubectl")) == []

    from spillway.adapters.kube import kubeconfig_argument_secrets

    observability = _words_only(monkeypatch)  # a short one is blanked where it stands as a word
    observability.add_secret_words(
        kubeconfig_argument_secrets(_exec_user(["get-token", "--password", "-pw1"]))
    )
    assert observability.redact("login --password -pw1 refused") == "login --password <redacted> refused"


def test_a_plugins_word_that_is_no_flag_gives_no_short_flag_a_secret() -> None:
    """Only an argument starting with ``-`` is a group of one-letter flags (pflag's parseArgs): doctl's
    cluster named ``staging`` or ``streaming-prod`` is an argument, not ``-t`` given ``aging`` (blanked
    as a word from every line) or ``reaming-prod`` (blanked inside the cluster's name wherever a line
    names it)."""
    for cluster in ("staging", "streaming-prod", "ctl"):
        args = ["kubernetes", "cluster", "kubeconfig", "exec-credential", "--version=v1beta1", cluster]
        assert kubeconfig_secrets(_exec_user(args, "doctl")) == [], cluster


def test_an_argument_a_secret_flag_took_is_read_as_no_flag() -> None:
    """pflag gives a flag that is no switch the next argument as its value and reads on after it: a secret
    starting with ``-`` whose letters read as a flag named as a secret's (``-…apiKey``) takes no
    argument of its own, so the flag after it (``--server-id``) is not taken for a secret and blanked."""
    secret = "-Xk9.Q_apiKey"
    args = ["get-token", "--client-secret", secret, "--server-id", "6dae42f8-4368-4678-94ff-3960e28e3630"]
    assert kubeconfig_secrets(_exec_user(args)) == [secret]


def test_a_secret_named_flag_followed_by_a_long_flag_takes_no_value() -> None:
    """pflag gives a flag its next argument only when the flag takes a value (parseLongArg: a bool flag,
    ``NoOptDefVal`` set, takes none); a flag followed by another ``--flag`` is such a switch in any command
    line its plugin runs with (a flag that takes a value would swallow the flag after it, and the plugin
    would fail for the option it lost). So a switch named as a secret's that is not
    ``--oidc-use-access-token`` does not take the secret flag after it, whose value would then be read as
    an argument and left in the logs; and a secret flag given no value blanks no flag's name."""
    secret = "Qx8Q~" + "s3" * 16
    assert kubeconfig_secrets(_exec_user(["get-token", "--use-token", "--client-secret", secret])) == [secret]
    given = ["get-token", "--skip-password", f"--client-secret={secret}", "--login", "spn"]
    assert kubeconfig_secrets(_exec_user(given)) == [secret]
    assert kubeconfig_secrets(_exec_user(["get-token", "--client-secret", "--login", "spn"])) == []
    assert kubeconfig_secrets(_exec_user(["get-token", "--password", "-pw1", "--login", "x"])) == ["-pw1"]
