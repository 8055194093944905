"""The privacy filter: e-mail addresses, formatted phone numbers, keys, tokens and private keys become
placeholders, and code, logs, dates, hashes, addresses, versions and numbers come through untouched.

Key-shaped values are built at run time (`fake`, `pem`, `jwt`) so that this file holds nothing a secret
scanner would flag, and so that each test's value is plainly a fixture.
"""

from __future__ import annotations

import base64
import json
import random
import string
import time
from typing import get_args

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from moa_chat.text.redaction import (
    EMAIL,
    PHONE,
    PRIVACY_MODES,
    PRIVATE_KEY,
    SECRET,
    PrivacyMode,
    apply,
    redact_private,
)

ALNUM = string.ascii_letters + string.digits
URL_SAFE = ALNUM + "-_"


def fake(prefix: str, length: int = 40, alphabet: str = ALNUM) -> str:
    """`prefix` and `length` pseudo-random characters from `alphabet` (the same ones every run), starting with
    an upper-case letter, a lower-case letter and a digit as far as `alphabet` has them: real keys all but
    always have each somewhere."""
    rng = random.Random(prefix + str(length) + alphabet)
    pools = (string.ascii_uppercase, string.ascii_lowercase, string.digits)
    head = "".join(rng.choice([c for c in alphabet if c in pool]) for pool in pools if set(pool) & set(alphabet))
    return prefix + head + "".join(rng.choice(alphabet) for _ in range(length - len(head)))


def b64url(data: dict[str, object]) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


def jwt(signature: str = fake("", 43, URL_SAFE)) -> str:
    return f"{b64url({'alg': 'HS256', 'typ': 'JWT'})}.{b64url({'sub': '1234567890', 'iat': 1516239022})}.{signature}"


def pem(label: str, *, lines: int = 4, newline: str = "\n", end: bool = True, indent: str = "") -> str:
    """A PEM block with `label` (e.g. "RSA PRIVATE KEY") and base64 lines that decode to nothing."""
    rng = random.Random(label)
    body = [indent + "".join(rng.choice(ALNUM + "+/") for _ in range(64)) for _ in range(lines)]
    body.append(indent + "AAAAAAAAAAAAAAAAAAAAAAAA==")
    armour = ["-" * 5 + "BEGIN " + label + "-" * 5, *body]
    if end:
        armour.append(indent + "-" * 5 + "END " + label + "-" * 5)
    return newline.join(armour)


# --- Positive cases ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("alice.smith+tag@example.co.uk", "[email]"),
        ("Contact alice.smith+tag@example.co.uk for access.", "Contact [email] for access."),
        ("alice@example.com is the owner", "[email] is the owner"),
        ("Send the report to bob@example.org", "Send the report to [email]"),
        ("Send it to bob@example.org.", "Send it to [email]."),
        ("alice@example.com, bob@example.org; carol@sub.example.io", "[email], [email]; [email]"),
        ("Author: Alice Smith <alice@example.com>", "Author: Alice Smith <[email]>"),
        ("mailto:alice@example.com", "mailto:[email]"),
        ("(see ALICE@EXAMPLE.COM)", "(see [email])"),
        ("first_last@example-domain.com", "[email]"),
        ("_build@ci.example.dev", "[email]"),
        ("o'brien, dan.o.brien-2@mail.example.museum", "o'brien, [email]"),
        ('{"email": "alice@example.com", "name": "Alice"}', '{"email": "[email]", "name": "Alice"}'),
        ("Signed-off-by: Alice Smith <alice.smith@example.com>\n", "Signed-off-by: Alice Smith <[email]>\n"),
        # Decision: a dotted host is an address, even after ssh (a person's login on a named machine).
        ("ssh alice@prod.example.com", "ssh [email]"),
    ],
)
def test_emails_are_redacted(text: str, expected: str) -> None:
    assert redact_private(text) == expected


@pytest.mark.parametrize(
    "number",
    [
        "+44 20 7946 0958",
        "+1 (555) 123-4567",
        "+33 1 23 45 67 89",
        "(555) 123-4567",
        "555-123-4567",
        "555.123.4567",
        "+44 (0)20 7946 0958",
        "+1-555-123-4567",
        "+1 555-123-4567",
        "+1 555 123 4567",
        "+1.555.123.4567",
        "+1(555)123-4567",
        "+91-98765-43210",
        "+49 30 12345678",
        "+61 2 9876 5432",
        "+86 138 0013 8000",
        "(555)123-4567",
        "(555) 123 4567",
        "1-800-555-1234",
        "1 (800) 555-1234",
    ],
)
@pytest.mark.parametrize(
    "template",
    ["{}", "Call me at {}.", "{} is my cell", "phone: {}\n", "| Alice | {} |", "tel:{}", '"phone": "{}"'],
)
def test_formatted_phone_numbers_are_redacted(number: str, template: str) -> None:
    assert redact_private(template.replace("{}", number)) == template.replace("{}", PHONE)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("home (555) 123-4567, work +44 20 7946 0958", "home [phone], work [phone]"),
        ("+91-98765-43210 1-800-555-1234", "[phone] [phone]"),
        ("555-123-4567/555.123.4567", "[phone]/[phone]"),
        ("Alice: +33 1 23 45 67 89\nBob: 555-123-4567", "Alice: [phone]\nBob: [phone]"),
    ],
)
def test_several_phone_numbers_on_a_line(text: str, expected: str) -> None:
    assert redact_private(text) == expected


KEYS = {
    "OpenAI (legacy)": fake("sk-", 48),
    "OpenAI project": fake("sk-proj-", 156, URL_SAFE),
    "OpenAI service account": fake("sk-svcacct-", 120, URL_SAFE),
    "Anthropic": fake("sk-ant-api03-", 93, URL_SAFE) + "-" + fake("", 6) + "AA",
    "DeepSeek": "sk-" + fake("", 32, "0123456789abcdef"),
    "Stripe secret": fake("sk_" + "live_", 24),
    "Stripe test": fake("sk_" + "test_", 99),
    "Stripe publishable": fake("pk_" + "live_", 24),
    "Stripe restricted": fake("rk_" + "live_", 24),
    "restricted (other)": fake("rk_", 32),
    "Groq": fake("gsk_", 52),
    "xAI": fake("xai-", 80),
    "Cerebras": fake("csk-", 48, string.ascii_lowercase + string.digits),
    "Fireworks": fake("fw_", 24),
    "GitHub classic": fake("ghp_", 36),
    "GitHub OAuth": fake("gho_", 36),
    "GitHub server": fake("ghs_", 36),
    "GitHub fine-grained": fake("github_pat_", 22) + "_" + fake("", 59),
    "GitLab": fake("glpat-", 20, URL_SAFE),
    "Slack bot": "xox" + "b-" + "123456789012-1234567890123-" + fake("", 24),
    "Slack user": "xox" + "p-" + "123456789012-123456789012-123456789012-" + fake("", 32, "0123456789abcdef"),
    "Slack app": "xox" + "a-2-" + fake("", 40),
    "AWS access key id": "AKIA" + "IOSFODNN7EXAMPLE",  # AWS's documentation example
    "AWS temporary key id": fake("ASIA", 16, string.ascii_uppercase + string.digits),
    "Google API key": fake("AIza", 35, URL_SAFE),
    "JWT": jwt(),
    "JWT, alg none": b64url({"alg": "none"}) + "." + b64url({"sub": "alice", "admin": True}) + ".",
}

KEY_TEMPLATES = [
    "{}",
    "key: {}",
    "OPENAI_API_KEY={}",
    'export API_KEY="{}"',
    "{} is my key",
    "my key is {} and it works",
    "client = OpenAI(api_key='{}')",
    '{"api_key": "{}", "model": "gpt-4o"}',
    "- token: {}\n- other: {}",
    "https://api.example.com/v1?key={}&alt=json",
]


@pytest.mark.parametrize("key", KEYS.values(), ids=KEYS.keys())
@pytest.mark.parametrize("template", KEY_TEMPLATES)
def test_keys_and_tokens_are_redacted(key: str, template: str) -> None:
    redacted = redact_private(template.replace("{}", key))
    assert redacted == template.replace("{}", SECRET)
    assert key not in redacted


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Authorization: Bearer abc123def456ghi789", "Authorization: Bearer [secret]"),
        ("authorization: bearer abcdef1234567890", "authorization: bearer [secret]"),
        ("AUTHORIZATION: BEARER ABCDEF1234567890", "AUTHORIZATION: BEARER [secret]"),
        (f"Authorization: Bearer {jwt()}", "Authorization: Bearer [secret]"),
        (f"-H 'Authorization: Bearer {KEYS['OpenAI (legacy)']}'", "-H 'Authorization: Bearer [secret]'"),
        ("Authorization: Bearer ya29.a0AfH6SMBx-Kq_3~dE+f/g==", "Authorization: Bearer [secret]"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "Authorization: Basic [secret]"),
        ("Proxy-Authorization: Basic YWxhZGRpbjpvcGVuc2VzYW1l", "Proxy-Authorization: Basic [secret]"),
        ("Basic dXNlcjpwYXNz", "Basic [secret]"),
        ('headers={"Authorization": "Bearer abc123def456ghi789"}', 'headers={"Authorization": "Bearer [secret]"}'),
        ("Bearer\tabc123def456ghi789 then Basic dXNlcjpwYXNz", "Bearer\t[secret] then Basic [secret]"),
    ],
)
def test_authorization_values_are_redacted_and_the_scheme_kept(text: str, expected: str) -> None:
    assert redact_private(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"token={jwt()}&next=/home", "token=[secret]&next=/home"),
        (f"Cookie: session={jwt()}; Path=/", "Cookie: session=[secret]; Path=/"),
        (f"{jwt()}\n{jwt('x' * 10)}", "[secret]\n[secret]"),
        (f"The token {jwt()}.", "The token [secret]."),
    ],
)
def test_jwts_are_redacted(text: str, expected: str) -> None:
    assert redact_private(text) == expected


@pytest.mark.parametrize(
    "label",
    [
        "PRIVATE KEY",
        "RSA PRIVATE KEY",
        "EC PRIVATE KEY",
        "DSA PRIVATE KEY",
        "OPENSSH PRIVATE KEY",
        "ENCRYPTED PRIVATE KEY",
        "PGP PRIVATE KEY BLOCK",
    ],
)
def test_private_key_blocks_are_redacted_whole(label: str) -> None:
    block = pem(label)
    text = f"Here is my key:\n\n{block}\n\nWhy does ssh reject it?"
    assert redact_private(text) == "Here is my key:\n\n[private key]\n\nWhy does ssh reject it?"
    assert redact_private(block) == PRIVATE_KEY


def test_private_key_block_variants() -> None:
    # CRLF line ends; a legacy encrypted key, with headers; indented in YAML; two blocks; a chain then the key.
    assert redact_private(pem("RSA PRIVATE KEY", newline="\r\n") + "\r\nok") == "[private key]\r\nok"
    encrypted = pem("RSA PRIVATE KEY").replace(
        "KEY-----\n", "KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,0123456789ABCDEF\n\n", 1
    )
    assert redact_private(encrypted) == PRIVATE_KEY
    yaml_text = "tls:\n  key: |\n    " + pem("EC PRIVATE KEY", indent="    ") + "\n  port: 8443\n"
    assert redact_private(yaml_text) == "tls:\n  key: |\n    [private key]\n  port: 8443\n"
    two = pem("PRIVATE KEY") + "\n" + pem("OPENSSH PRIVATE KEY")
    assert redact_private(two) == "[private key]\n[private key]"
    chain = pem("CERTIFICATE") + "\n" + pem("PRIVATE KEY")
    assert redact_private(chain) == pem("CERTIFICATE") + "\n[private key]"


def test_private_key_in_json_with_escaped_newlines() -> None:
    # A cloud service-account file: the key is one JSON string with \n escapes.
    account = {"type": "service_account", "private_key": pem("PRIVATE KEY") + "\n", "project_id": "demo-123"}
    text = json.dumps(account)
    assert redact_private(text) == json.dumps({**account, "private_key": "[private key]\n"})


def test_a_private_key_cut_off_before_its_end_line_is_redacted_up_to_the_end_of_its_base64() -> None:
    truncated = pem("RSA PRIVATE KEY", end=False)
    assert redact_private(f"{truncated}\n\nthe rest was lost") == "[private key]\n\nthe rest was lost"
    escaped = json.dumps({"k": truncated})  # JSON-escaped newlines, and the string ends before END
    assert redact_private(escaped) == '{"k": "[private key]"}'


def test_a_cut_off_private_key_does_not_run_on_to_the_end_of_the_next_one() -> None:
    text = f"{pem('RSA PRIVATE KEY', end=False)}\nkeep this\n{pem('PUBLIC KEY')}\nand this\n{pem('PRIVATE KEY')}"
    assert redact_private(text) == f"[private key]\nkeep this\n{pem('PUBLIC KEY')}\nand this\n[private key]"


def test_everything_at_once_at_the_start_and_end_of_the_text() -> None:
    text = (
        f"alice@example.com wrote: call +1 (555) 123-4567, key {KEYS['Groq']}, "
        f"token {jwt()} and Bearer abc123def456ghi789\n{pem('PRIVATE KEY')}"
    )
    assert redact_private(text) == (
        "[email] wrote: call [phone], key [secret], token [secret] and Bearer [secret]\n[private key]"
    )


# --- Negative cases ------------------------------------------------------------------------------------------

UNCHANGED = [
    # Code that contains the key prefixes, not at a token start or without a random run after them.
    "def task_sk(x): return x",
    "sk_learn = 3",
    "from sklearn.model_selection import train_test_split",
    "risk-free rate of return",
    "the disk-based cache and a task-specific-handler-for-everything-0123",
    "mask-rcnn_resnet50_fpn_coco_2017",
    "isk-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
    "my-sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ012345",
    "fw_checkpoint_directory_for_run_2024 = 1",
    "gh_pages_branch = 'gh-pages'",
    "ghp_token = os.environ['GH_TOKEN']",
    "sk_test_user_model_fixture_2 = None",
    "pk_live_orders_view_for_region_eu_west_1",
    "xai-sdk-python-integration-tests",
    "csk-config-loader",
    "github_pat_expiry_check_function_name()",
    "rk_integrator_step(state, dt=0.01)",
    "sk-learn-compatible-estimator-wrapper",
    "AKIA_PREFIX = 'AKIA'",
    "SKAKIAIOSFODNN7EXAMPLEXYZ",
    "eyJhbGciOiJIUzI1NiJ9",
    # Decorators, matrix products, handles, ssh logins, package specs, SSH remotes.
    "@dataclass(frozen=True)\nclass Point:\n    x: int",
    "@pytest.mark.parametrize('x', [1, 2])",
    "y = x @ w + b",
    "y = a@b",
    "y = X@W.T",
    "user@host",
    "ssh deploy@buildbox 'uptime'",
    "npm install lodash@4.17.21 @types/node@20.11.5",
    "npx create-next-app@latest",
    "docker pull nginx@sha256:" + "0123456789abcdef" * 4,
    "https://medium.com/@alice/my-post-1234",
    "git clone git@github.com:owner/repo.git",
    "pip install git+ssh://git@github.com/owner/repo.git@v1.2.3",
    "git reflog: HEAD@{1}, stash@{0}",
    "@media (max-width: 600px) { .a { color: red } }",
    # Dates and times.
    "2026-12-01",
    "01/12/2026",
    "12.01.2026",
    "2026-12-01T03:45:00Z",
    "2026-12-01T03:45:00.123456+01:00",
    "03:45:00",
    "Date: Mon, 01 Dec 2026 03:45:00 +0000",
    "[2026-12-01 03:45:00,123] INFO took 1234 ms",
    "Dec  1 03:45:00 host sshd[12345]: Accepted publickey for alice from 192.168.1.20 port 52234",
    "between 2026-12-01 and 2026-12-31",
    # Hashes and ids.
    "commit 1a2b3c4",
    "commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
    "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "id=123e4567-e89b-12d3-a456-426614174000",
    "id=12345678-1234-5678-1234-567812345678",
    "request 550e8400-e29b-41d4-a716-446655440000 failed",
    # Network addresses and ports.
    "192.168.1.20",
    "connect to 10.0.0.1:8080 failed",
    "listening on 0.0.0.0:8000 and [::1]:8000",
    "fe80::1",
    "2001:db8::8a2e:370:7334",
    "ping 255.255.255.255",
    "localhost:5432",
    "port 443",
    # Versions.
    "3.11.7",
    "v1.2.3",
    "Python 3.11.7 (main, Dec  1 2026, 03:45:00) [GCC 13.2.0]",
    "1.0.0+20130313144700",
    "2.0.0-rc.1+build.123",
    "numpy==1.26.4\ntextual==8.2.8",
    # Line numbers and ranges.
    "line 1234",
    "L10-L20",
    "https://github.com/owner/repo/blob/main/app/x.py#L10-L20",
    "file.py:123:45",
    '  File "/work/app/main.py", line 1234, in run',
    "app/privacy.py:12:1: E501 line too long (130 > 120)",
    # Money and numbers.
    "$1,234.56",
    "€1.234,56",
    "1,000,000",
    "3.14159",
    "1e+10 and 6.02e+23",
    "-1234567890",
    "x = +12",
    "epoch 1700000000.123",
    "ISBN 978-3-16-148410-0",
    "ranges 100-200, 8000-8080",
    "scores: +12 34 56",
    "@@ -10,7 +10,8 @@ def main():",
    # Decisions: bare digit runs are not phone numbers, even after a `+`; nor are space-only 3-3-4 groups or
    # national formats outside North America.
    "5551234567",
    "+14155552671",
    "+1700000000",
    "555 123 4567",
    "020 7946 0958",
    "555-123-4567-89",
    "1.555.123.4567.8",
    # Authorization schemes followed by words, or by code that builds the header.
    "Basic Authentication is weak",
    "HTTP Basic authentication",
    "a bearer token-based scheme",
    'headers = {"Authorization": f"Bearer {token}"}',
    "Authorization: Bearer $TOKEN",
    "Authorization: Bearer <token>",
    '"Bearer " + token',
    "BASIC PROGRAMMING",
    # Placeholders in documentation: not random enough to be keys.
    "Authorization: Bearer YOUR_API_KEY",
    "Authorization: Bearer your-token-here",
    "OPENAI_API_KEY=sk-your-key-here",
    "OPENAI_API_KEY=sk-xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx",
    "api_key: sk-...",
    "GROQ_API_KEY=gsk_...",
    # Public key material.
    pem("PUBLIC KEY"),
    pem("CERTIFICATE"),
    pem("RSA PUBLIC KEY"),
    "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl alice@laptop",
    # Placeholders themselves.
    "[email] [phone] [secret] [private key] Bearer [secret]",
    "",
]


@pytest.mark.parametrize("text", UNCHANGED)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_private(text) == text


PYTHON = '''\
"""Matrix helpers: see https://github.com/owner/repo/blob/3f2a9c1/app/linalg.py#L10-L20."""
from __future__ import annotations

import numpy as np
from sklearn.linear_model import LinearRegression as sk_learn_model


@dataclass(frozen=True)
class Task:
    deadline: str = "2026-12-01T03:45:00Z"
    version: str = "3.11.7"
    risk_free: float = 0.0315


@functools.cache
def task_sk(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    """Project x on w (1,000,000 rows at most; ~3.14159 ms per 1e+6)."""
    y = x @ w
    z = x@w.T
    assert y.shape == (1024, 768), f"line {1234}: {y.shape}"
    return y.reshape(-1, 3) if z.sum() > 1e-9 else np.zeros((555, 123))


HOSTS = {"db": "192.168.1.20:5432", "cache": "[fe80::1]:6379", "api": "https://api.example.com:8443/v1"}
CHECKSUM = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
RUN_ID = "550e8400-e29b-41d4-a716-446655440000"
PRICE = "$1,234.56"
headers = {"Authorization": f"Bearer {os.environ['API_TOKEN']}"}
'''

LOG = """\
2026-12-01T03:45:00.123Z INFO  server listening on 0.0.0.0:8000 (pid 12345, v1.2.3)
2026-12-01T03:45:01.004Z DEBUG GET /api/v1/items?page=2&limit=100 200 OK 12.5ms from 10.0.0.7:52234
2026-12-01T03:45:02.918Z WARN  retry 3/5 after 1.5s: connection reset by [2001:db8::8a2e:370:7334]:443
2026-12-01T03:45:03.000Z ERROR Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/httpx/_client.py", line 1234, in send
  File "/work/app/main.py", line 56, in <module>
ValueError: expected 12.01.2026 or 01/12/2026, got '2026-13-45'
commit 1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b (HEAD -> main, origin/main)
Merge: 1a2b3c4 5d6e7f8
@@ -1234,7 +1234,8 @@ def handler(event):
-    timeout = 30
+    timeout = 1700000000
 ok: 1,000,000 rows in 03:45:00; disk-based; risk-free; line 1234
"""

MARKDOWN = """\
# Release 3.11.7 (2026-12-01)

| metric  | before    | after     |
|---------|-----------|-----------|
| p50     | 12.5 ms   | 8.1 ms    |
| rows    | 1,000,000 | 2,000,000 |
| cost    | $1,234.56 | $987.65   |

```python
@app.route("/items/<int:item_id>")
def get_item(item_id: int) -> dict[str, int]:
    return {"id": item_id, "version": 3}
```

```bash
pip install moa-chat==0.1.0 && moa-chat --port 8080
git log --oneline -3  # 1a2b3c4 fix L10-L20, 5d6e7f8 bump v1.2.3
```

See `app/privacy.py:12:1` and https://example.com/docs/v1.2.3/index.html#section-4.2.
"""


@pytest.mark.parametrize("text", [PYTHON, LOG, MARKDOWN], ids=["python", "log", "markdown"])
def test_realistic_code_logs_and_markdown_are_left_alone(text: str) -> None:
    assert redact_private(text) == text


def test_only_the_private_parts_of_a_code_block_change() -> None:
    key = KEYS["OpenAI (legacy)"]
    before = (
        "```bash\n"
        "curl https://api.openai.com/v1/chat/completions \\\n"
        f'  -H "Authorization: Bearer {key}" \\\n'
        '  -d \'{"model": "gpt-4o", "messages": [{"role": "user", "content": "email alice@example.com"}]}\'\n'
        "```\n"
    )
    after = before.replace(key, SECRET).replace("alice@example.com", EMAIL)
    assert redact_private(before) == after


# --- Properties ----------------------------------------------------------------------------------------------

FRAGMENTS = [
    *KEYS.values(),
    "alice@example.com",
    "+44 20 7946 0958",
    "(555) 123-4567",
    "555.123.4567",
    "Bearer abc123def456ghi789",
    pem("RSA PRIVATE KEY"),
    pem("PRIVATE KEY", end=False),
    *UNCHANGED[:40],
]
SEPARATORS = st.sampled_from([" ", "\n", ", ", ".", "-", "(", ")", '"', "=", "", "@", "+", ":", "/"])


@given(st.lists(st.tuples(st.sampled_from(FRAGMENTS), SEPARATORS), max_size=12))
@settings(max_examples=300, deadline=None)
def test_redacting_twice_changes_nothing_more(parts: list[tuple[str, str]]) -> None:
    text = "".join(fragment + separator for fragment, separator in parts)
    once = redact_private(text)
    assert redact_private(once) == once


@given(st.text(alphabet=string.ascii_lowercase + " \n\t.,;:!?'\"()[]{}<>/\\-_=*#$%&|~`", max_size=300))
@settings(max_examples=300, deadline=None)
def test_text_without_digits_capitals_or_at_signs_is_never_changed(text: str) -> None:
    assert redact_private(text) == text


@given(st.text(max_size=200))
@settings(max_examples=300, deadline=None)
def test_any_text_gives_a_string(text: str) -> None:
    assert isinstance(redact_private(text), str)


# --- Modes ---------------------------------------------------------------------------------------------------

SAMPLE = "mail alice@example.com, key " + KEYS["Groq"]
SAMPLE_REDACTED = "mail [email], key [secret]"


@pytest.mark.parametrize(
    ("mode", "for_models", "expected"),
    [
        ("off", False, SAMPLE),
        ("off", True, SAMPLE),
        ("display", False, SAMPLE_REDACTED),  # what the UI and traces show
        ("display", True, SAMPLE),  # what the models receive
        ("full", False, SAMPLE_REDACTED),
        ("full", True, SAMPLE_REDACTED),
    ],
)
def test_apply_follows_the_mode(mode: PrivacyMode, for_models: bool, expected: str) -> None:
    assert apply(mode, SAMPLE, for_models=for_models) == expected


def test_the_modes_are_the_literal_type() -> None:
    assert PRIVACY_MODES == get_args(PrivacyMode) == ("off", "display", "full")


def test_an_unknown_mode_is_an_error_not_a_guess() -> None:
    with pytest.raises(ValueError, match="unknown privacy mode 'on'"):
        apply("on", SAMPLE, for_models=False)  # type: ignore[arg-type]


# --- Speed ---------------------------------------------------------------------------------------------------


def test_a_megabyte_of_mixed_text_is_quick() -> None:
    prose = "The quick brown fox jumps over the lazy dog; it was 3.5 m at 03:45 on 2026-12-01, v1.2.3. " * 20
    chunk = "\n".join([PYTHON, LOG, MARKDOWN, prose, *FRAGMENTS, *UNCHANGED])
    text = (chunk * (1_000_000 // len(chunk) + 1))[:1_000_000]
    started = time.perf_counter()
    redacted = redact_private(text)
    elapsed = time.perf_counter() - started
    print(f"\nredact_private: {len(text):,} characters in {elapsed * 1000:.0f} ms")
    assert SECRET in redacted and EMAIL in redacted and PHONE in redacted and PRIVATE_KEY in redacted
    assert redacted.count("def task_sk(") == text.count("def task_sk(")  # the ordinary text is all still there
    assert elapsed < 5  # a sanity bound for a busy machine; it takes a fraction of a second
