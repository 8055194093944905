"""Redacting private data (e-mail addresses, phone numbers, keys and tokens, private keys) from text.

`redact_private(text)` replaces each such thing with a placeholder: `[email]`, `[phone]`, `[secret]` or
`[private key]`. `apply(mode, text, for_models=...)` is what callers use: it decides from the privacy mode
whether a given text is redacted at all.

The rules lean towards leaving text alone. The text here is mostly code, logs and Markdown, and a filter that
rewrites `sk_learn`, a date, a git SHA or an IP address breaks the very thing the user is working on. So every
pattern has a boundary on each side (no match starts in the middle of an identifier or a number) and a shape
that ordinary code does not have. What is deliberately left alone:

- `user@host` without a dot in the host: ssh-style logins, npm's `pkg@latest`, `image@sha256:...`, decorators
  (`@dataclass`) and matrix products (`x @ y`, `a@b`). An e-mail address needs a dotted domain ending in a
  letters-only TLD of two or more letters, so `a@b.T` (a transpose) and `lodash@4.17.21` stay too.
- `git@github.com`-style SSH remotes: the local part `git` is a service account, never a person, and these
  remotes are in every clone command and pip requirement.
- Phone numbers that are bare digit runs, even with a leading `+` (`+14155552671`, `5551234567`): the
  shape cannot tell them from timestamps, ids and counters, and a diff's added line `+1700000000` looks just
  the same. Only formatted numbers are redacted: international ones (`+` and a country code, then groups of
  digits split by spaces, dots or dashes, one group maybe in brackets) and North American ones
  (`(555) 123-4567`, `555-123-4567`, `555.123.4567`). National formats elsewhere (`020 7946 0958`) are not
  recognised: a row of space-separated numbers is just as likely a table or a list.
- Prefixed tokens that read like identifiers: a key prefix (`sk-`, `gsk_`, `fw_`, `ghp_`, ...) counts only
  when an unbroken run of 20+ letters and digits follows it that looks random (it has a digit, or upper and
  lower case letters past its first). `sk_learn_model_v2` and `fw_checkpoint_dir` are words joined by `_`,
  not a key.
- `Bearer`/`Basic` followed by a word: `Basic Authentication`, `bearer token-based`. The value must be 8+
  characters that look random (a digit, inner capitals, or base64's `+`, `/`, `=`).
- Public material: certificates and `BEGIN PUBLIC KEY` blocks. Only PEM blocks whose label ends in
  `PRIVATE KEY` (or `PRIVATE KEY BLOCK`, for PGP) are redacted, END line included; a block cut off before its
  END line loses its BEGIN line and the base64 lines that follow it.

Known gaps, by design: a secret with no recognisable shape (a password, an AWS secret access key, a bare
hex token) is not found; nor are compact `+E.164` numbers (above). A matrix product written without spaces
whose right side is a dotted attribute (`x@self.weights`) looks exactly like an e-mail address and is redacted.

Pure standard library and linear in the text's length: every pattern starts with a literal or a boundary that
fails fast, and no quantifier is nested in another that can match the same text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal, NamedTuple, get_args

PrivacyMode = Literal["off", "display", "full"]
PRIVACY_MODES: tuple[PrivacyMode, ...] = get_args(PrivacyMode)

EMAIL = "[email]"
PHONE = "[phone]"
SECRET = "[secret]"
PRIVATE_KEY = "[private key]"


def apply(mode: PrivacyMode, text: str, *, for_models: bool) -> str:
    """`text` as the privacy `mode` wants it shown (`for_models=False`) or sent to a model (`for_models=True`).

    off: unchanged. display: redacted on screen and in traces, sent to models as it is (the model needs the
    real address to write the e-mail). full: redacted everywhere.
    """
    if mode == "off":
        return text
    if mode == "display":
        return text if for_models else redact_private(text)
    if mode == "full":
        return redact_private(text)
    # A typo in the config must not quietly turn the filter off (or on): say so.
    raise ValueError(f"unknown privacy mode {mode!r}: expected one of {', '.join(PRIVACY_MODES)}")


def redact_private(text: str) -> str:
    """`text` with e-mail addresses, formatted phone numbers, secret-looking tokens and private keys replaced."""
    for rule in _RULES:
        if not rule.needles or any(needle in text for needle in rule.needles):
            text = rule.pattern.sub(rule.replacement, text)
    return text


def _looks_random(token: str) -> bool:
    """Whether `token` reads like generated characters rather than a word: a digit, base64's `+/=`, or a capital
    after the first letter alongside lower case (`dXNlcjpwYXNz`, not `Authentication` or `HTTP`)."""
    if any(c.isdigit() or c in "+/=" for c in token):
        return True
    return any(c.isupper() for c in token[1:]) and any(c.islower() for c in token)


# Every rule below starts at a boundary (a look-behind: not after a letter, a digit, ...) and most end at one
# (a look-ahead). A placeholder counts as the token it replaced: the look-behinds refuse `]` (where a
# placeholder ends) and the look-aheads a placeholder itself. Otherwise a second pass would redact what the
# first left alone, because it was glued to something the first replaced: `555-123-4567+555.123.4567` would
# become `[phone]+555.123.4567`, and then `[phone][phone]`. With them, redacting redacted text changes nothing.
_NOT_BEFORE_PLACEHOLDER = r"(?!\[(?:email|phone|secret|private[ ]key)\])"

# --- Private keys ------------------------------------------------------------------------------------------
# First, so the base64 inside a key is gone before the other rules look at it. The body is anything up to the
# END line that does not hold `-----`: a block cut off before its END must not run on through the text after
# it to the END of the next block (and as each body stops at the next `-----`, no character is read by more
# than one). The bound is a generous one: the largest PEM private keys (RSA 8192, PGP with subkeys) are a few
# kilobytes. Works for JSON-escaped keys too ("-----BEGIN PRIVATE KEY-----\nMII...\n-----END PRIVATE
# KEY-----" in a service-account file).
_PEM_BLOCK = re.compile(
    r"""
    -----BEGIN[ ](?:[A-Z0-9]+[ ])*PRIVATE[ ]KEY(?:[ ]BLOCK)?-----     # RSA, EC, OPENSSH, ENCRYPTED, PGP ...
    (?: (?!-----) [\s\S] ){0,65536}?                                  # the body, headers and all
    -----END[ ](?:[A-Z0-9]+[ ])*PRIVATE[ ]KEY(?:[ ]BLOCK)?-----
    """,
    re.VERBOSE,
)

# A block cut off before its END line (a truncated paste, a reply that stopped): the BEGIN line and every
# following line that is nothing but base64, after real or JSON-escaped newlines, indented or not. A line
# counts if it is long (keys are written 64 or 70 to a line) or padded, so a short word on a line of its
# own after the key stays.
_PEM_TRUNCATED = re.compile(
    r"""
    -----BEGIN[ ](?:[A-Z0-9]+[ ])*PRIVATE[ ]KEY(?:[ ]BLOCK)?-----
    (?:
        (?:\r?\n|(?:\\r)?\\n) [ \t]*                        # a newline, real or escaped, and the indent
        (?: [A-Za-z0-9+/]{16,}={0,2} | [A-Za-z0-9+/]*={1,2} )   # a long line of base64, or the padded last one
        (?= [ \t]* (?:[\r\n"']|\\[rn]|$) )                  # with nothing else on the line
    )*
    """,
    re.VERBOSE,
)

# --- Tokens ------------------------------------------------------------------------------------------------
# An Authorization header's value, in a header, a curl command or a log line. The scheme word stays, so the
# reader still sees what kind of credential was there. Values are RFC 6750's b64token; `{token}`, `$TOKEN`
# and `<token>` are not (their braces and signs are outside it), so code that builds the header is untouched.
_AUTH_HEADER = re.compile(
    r"""
    (?<![\w\]-])
    (?P<scheme>[Bb]earer|BEARER|[Bb]asic|BASIC)    # HTTP schemes are case-insensitive; these are the cases seen
    (?P<space>[ \t]+)
    (?P<token>[A-Za-z0-9._~+/-]{8,}=*)
    (?![A-Za-z0-9._~+/=-])          # the whole value or nothing: no half-redacted token
    """
    + _NOT_BEFORE_PLACEHOLDER,
    re.VERBOSE,
)


def _auth_header(match: re.Match[str]) -> str:
    if not _looks_random(match["token"]):  # `Basic Authentication`, `bearer token-based`
        return match[0]
    return match["scheme"] + match["space"] + SECRET


# A JSON Web Token: base64url header and payload, both JSON objects, so both start `eyJ` (`{"`); the
# signature may be empty (alg "none").
_JWT = re.compile(
    r"""
    (?<![\w\]-])
    eyJ[A-Za-z0-9_-]{10,} \. eyJ[A-Za-z0-9_-]{10,} \. [A-Za-z0-9_-]*
    """,
    re.VERBOSE,
)

# Prefixes that are keys by themselves: nothing else is spelled like this, whatever follows is the key.
_DISTINCT_KEY = re.compile(
    r"""
    (?<![\w\]-])                     # not mid-identifier: `task-sk-proj-...` is someone's kebab name
    (?:
        sk-(?:proj|ant|svcacct|admin)-   # OpenAI project/service/admin keys, Anthropic `sk-ant-api03-`
      | glpat-                           # GitLab personal access token
      | xox[abprs]-                      # Slack bot/app/user/refresh tokens
    )
    [A-Za-z0-9_-]{16,}
    """,
    re.VERBOSE,
)

# Short prefixes that code also uses (`sk_learn`, `fw_config`, `gh_pages`): a key only if an unbroken run of
# 20+ letters and digits follows, and the run looks random (`_key_body` checks). Keys are base62 noise;
# identifiers are words joined by `_` or `-`, so their runs are short. The rest of the token goes with it.
_PREFIXED_KEY = re.compile(
    r"""
    (?<![\w\]-])
    (?:
        sk-                              # OpenAI (legacy), DeepSeek, most OpenAI-compatible providers
      | [spr]k_(?:live|test)_            # Stripe secret, publishable, restricted
      | rk_                              # restricted keys elsewhere
      | gsk_                             # Groq
      | xai-                             # xAI
      | csk-                             # Cerebras
      | fw_                              # Fireworks
      | gh[pousr]_                       # GitHub classic, OAuth, user-to-server, server, refresh tokens
      | github_pat_                      # GitHub fine-grained personal access token
    )
    (?P<run>[A-Za-z0-9]{20,})
    [A-Za-z0-9_-]*
    """,
    re.VERBOSE,
)


def _key_body(match: re.Match[str]) -> str:
    return SECRET if _looks_random(match["run"]) else match[0]


# Fixed-shape keys: AWS access key ids (long-term AKIA, temporary ASIA: 16 upper-case letters and digits)
# and Google API keys (AIza and 35 URL-safe characters; 30 will do, for a key cut short).
_FIXED_KEY = re.compile(
    r"""
    (?<![A-Za-z0-9\]])  (?:AKIA|ASIA)[0-9A-Z]{16}  (?![A-Za-z0-9])
  | (?<![\w\]-])        AIza[0-9A-Za-z_-]{30,}
    """
    + _NOT_BEFORE_PLACEHOLDER,
    re.VERBOSE,
)

# --- E-mail addresses --------------------------------------------------------------------------------------
# local@domain.tld, where the domain has at least one dot and ends in letters. The local part starts at a
# token boundary (not after a letter, digit, `.`, `+`, `%` or `-`), which is also what keeps a long run of
# word characters from being rescanned at every position. Lengths are RFC 5321's limits.
_EMAIL = re.compile(
    r"""
    (?<![\w.%+\]-])
    (?!git@)                                          # SSH remotes: git@github.com:owner/repo.git
    [A-Za-z0-9_] [A-Za-z0-9._%+-]{0,63}               # local part
    @
    (?: [A-Za-z0-9] (?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])? \. )+   # domain labels, each followed by a dot
    [A-Za-z]{2,63}                                    # TLD: letters, so `pkg@1.2.3` is a version
    (?![\w-])                                         # the whole TLD: `x@self.weights2` is code
    """
    + _NOT_BEFORE_PLACEHOLDER,
    re.VERBOSE,
)

# --- Phone numbers -----------------------------------------------------------------------------------------
# International: `+`, a country code (never starting with 0, so a `+0000` time zone is safe), then groups of
# digits, each after a space, dot or dash; the first may be bracketed, `(555)` or a trunk `(0)`. Spaces come
# before dashes and dots, never after (`+1 555-123-4567`), so a number does not run on into the next one in
# `+91-98765-43210 1-800-555-1234`. `_phone_digits` then wants 8 digits at least, which leaves out `+1 2 3`.
# Not after a word character: `1e+10`, `1.0.0+20130313` (semver build metadata).
_INTERNATIONAL_PHONE = re.compile(
    r"""
    (?<![\w+\]])
    \+[1-9][0-9]{0,2}                                  # country code
    (?: [ ]?\([0-9]{1,4}\)[ .-]?[0-9]{1,8}            # a bracketed group and the one after it: (555) 123
      | [ .-][0-9]{1,8}                                # or a plain first group
    )
    (?: [ ][0-9]{1,8} ){0,5}                           # more groups split by spaces
    (?: [.-][0-9]{1,8} ){0,5}                          # then by dashes or dots
    (?![\w]|[.-][0-9])                                 # not part of a longer number
    """
    + _NOT_BEFORE_PLACEHOLDER,
    re.VERBOSE,
)


def _phone_digits(match: re.Match[str]) -> str:
    return PHONE if sum(c.isdigit() for c in match[0]) >= 8 else match[0]


# North American: 3-3-4 digits, as `(555) 123-4567` or with the same `-` or `.` twice (`555-123-4567`,
# `555.123.4567`), maybe after a trunk `1-`. Spaces alone (`555 123 4567`) are a row of numbers. The
# boundaries keep it out of longer numbers: dates (`2026-12-01`), IPs, versions, UUIDs, `555-123-4567-89`.
_NORTH_AMERICAN_PHONE = re.compile(
    r"""
    (?<![\w.+\]-])
    (?:1[ .-])?
    (?: \([0-9]{3}\)[ ]?[0-9]{3}[ .-][0-9]{4}          # (555) 123-4567
      | [0-9]{3}(?P<sep>[.-])[0-9]{3}(?P=sep)[0-9]{4}  # 555-123-4567, 555.123.4567
    )
    (?![\w]|[.-][0-9])
    """
    + _NOT_BEFORE_PLACEHOLDER,
    re.VERBOSE,
)


class _Rule(NamedTuple):
    needles: tuple[str, ...]  # substrings the text must contain for the pattern to be worth a scan (any one)
    pattern: re.Pattern[str]
    replacement: str | Callable[[re.Match[str]], str]


# In order: whole private keys before the tokens in them, header values before the keys they carry (so the
# scheme word stays), keys before e-mail addresses, and addresses before the phone numbers in them. The
# needles are a substring search each, much faster than a scan that tries a boundary at every position:
# most text has no `@`, no `+` and no `eyJ`, and skips those rules.
_RULES = (
    _Rule(("PRIVATE KEY",), _PEM_BLOCK, PRIVATE_KEY),
    _Rule(("PRIVATE KEY",), _PEM_TRUNCATED, PRIVATE_KEY),
    _Rule(("earer", "EARER", "asic", "ASIC"), _AUTH_HEADER, _auth_header),
    _Rule(("eyJ",), _JWT, SECRET),
    _Rule(("sk-", "glpat-", "xox"), _DISTINCT_KEY, SECRET),
    _Rule(
        ("sk-", "sk_", "pk_", "rk_", "xai-", "fw_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
        _PREFIXED_KEY,
        _key_body,
    ),
    _Rule(("AKIA", "ASIA", "AIza"), _FIXED_KEY, SECRET),
    _Rule(("@",), _EMAIL, EMAIL),
    _Rule(("+",), _INTERNATIONAL_PHONE, _phone_digits),
    _Rule((), _NORTH_AMERICAN_PHONE, PHONE),
)
