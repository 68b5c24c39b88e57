"""Write the hostile-input corpus (tests/corpus/). Run: python tests/corpus/make_corpus.py

Each file is a session document (module "agent") with one hostile twist, or
plain hostile bytes. tests/test_hostile.py loads every file through every
codec and backend: each must load and round-trip, or raise a StatekitError
that changes nothing. Files named crash-*.bin are inputs a fuzz run crashed on.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
GOOD_AGENT_JSON = b'{"agent": {"name": "Friday", "turns": 1, "temperature": 0.5, "tags": [], "memory": {"content": []}}}\n'
GOOD_AGENT_YAML = b"agent:\n  name: Friday\n  turns: 1\n  temperature: 0.5\n  tags: []\n  memory:\n    content: []\n"


def yaml_with(name: bytes) -> bytes:
    return GOOD_AGENT_YAML.replace(b"name: Friday", b"name: " + name)


FILES: dict[str, bytes] = {
    # nesting (libyaml's composer crashed the process at ~25,000 levels)
    "deep-flow-25000.yaml": b"[" * 25_000 + b"]" * 25_000 + b"\n",
    "deep-block-25000.yaml": b"agent:\n" + b"- " * 25_000 + b"x\n",
    "deep-mapping-300.yaml": b"agent:\n" + b"".join(b"  " * i + b"k:\n" for i in range(1, 300)) + b"  " * 300 + b"k: 1\n",
    "deep-201.json": b'{"agent": {"memory": {"content": [{"role": "user", "meta": ' + b"[" * 197 + b"]" * 197 + b"}]}}}\n",
    "deep-5000.json": b'{"agent": ' + b"[" * 5000 + b"]" * 5000 + b"}\n",
    # integers
    "int-5000-digits.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: " + b"7" * 5000),
    "int-5000-digits.json": GOOD_AGENT_JSON.replace(b'"turns": 1', b'"turns": ' + b"7" * 5000),
    "int-beyond-64-bits.json": GOOD_AGENT_JSON.replace(b'"turns": 1', b'"turns": 18446744073709551616'),
    "int-beyond-64-bits.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: 18446744073709551616"),
    "int-hex-past-the-digit-limit.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: 0x" + b"f" * 3600),
    "base-60-float-overflow.yaml": GOOD_AGENT_YAML.replace(b"0.5", b"1:" * 200 + b"1.5"),  # YAML 1.1: OverflowError
    # aliases and tags
    "alias-bomb.yaml": b"a: &a [x, x, x, x, x, x, x, x, x]\n"
    + b"".join(b"%c: &%c [%s]\n" % (98 + i, 98 + i, b", ".join([b"*%c" % (97 + i)] * 9)) for i in range(9))
    + b"agent: *j\n",
    "alias-reuse.yaml": b"tags: &t [web]\nagent:\n  name: Friday\n  tags: *t\n",
    "merge-key.yaml": b"agent:\n  <<: {name: Friday, turns: 1}\n  temperature: 0.5\n  tags: []\n  memory: {content: []}\n",
    "tag-python-object.yaml": b"agent: !!python/object/apply:os.system ['echo pwned > /tmp/statekit-pwned']\n",
    "tag-python-name.yaml": yaml_with(b"!!python/name:os.system"),
    "tag-binary.yaml": yaml_with(b"!!binary aGVsbG8="),
    "tag-set.yaml": b"agent: !!set {a, b}\n",
    "tag-timestamp.yaml": yaml_with(b"!!timestamp 2025-01-01"),
    "tag-custom.yaml": yaml_with(b"!secret Friday"),
    "tag-str-on-int.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: !!str 1"),
    "tag-str-on-list-key.yaml": GOOD_AGENT_YAML + b"  ? !!str [a]\n  : 1\n",
    "tag-float-not-a-number.yaml": GOOD_AGENT_YAML.replace(b"0.5", b"!!float abc"),
    "tag-bool-maybe.yaml": GOOD_AGENT_YAML.replace(b"tags: []", b"tags: [!!bool maybe]"),
    "tag-int-empty.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: !!int"),
    "tag-int-on-base-60.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: !!int 1:30"),
    # encodings
    "invalid-utf8.json": GOOD_AGENT_JSON.replace(b"Friday", b"Fri\xffday"),
    "invalid-utf8.yaml": yaml_with(b"Fri\xffday"),
    "overlong-utf8.json": GOOD_AGENT_JSON.replace(b"Friday", b"Fri\xc0\xafday"),
    "surrogate-bytes.yaml": yaml_with(b"\xed\xa0\x80"),
    "lone-surrogate-escape.json": GOOD_AGENT_JSON.replace(b"Friday", b"\\ud800"),
    "lone-surrogate-escape.yaml": yaml_with(b'"\\ud800"'),
    "nul-byte.yaml": yaml_with(b"Fri\x00day"),
    "nul-escape.json": GOOD_AGENT_JSON.replace(b"Friday", b"Fri\\u0000day"),
    "utf16-bom.yaml": b"\xff\xfe" + GOOD_AGENT_YAML.decode().encode("utf-16-le"),
    "utf8-bom.json": b"\xef\xbb\xbf" + GOOD_AGENT_JSON,
    "bidi-and-emoji.yaml": yaml_with("\u202eFriday \U0001f600 \u200b".encode()),
    # shapes and values
    "duplicate-key.yaml": GOOD_AGENT_YAML + b"  name: Mallory\n",
    "duplicate-key.json": GOOD_AGENT_JSON.replace(b'"turns": 1', b'"turns": 1, "turns": 2'),
    "non-string-key.yaml": GOOD_AGENT_YAML + b"  1: one\n",
    "nan.json": GOOD_AGENT_JSON.replace(b"0.5", b"NaN"),
    "nan.yaml": GOOD_AGENT_YAML.replace(b"0.5", b".nan"),
    "infinity.yaml": GOOD_AGENT_YAML.replace(b"0.5", b".inf"),
    "float-overflow.json": GOOD_AGENT_JSON.replace(b"0.5", b"1e999"),
    "tab-indent.yaml": GOOD_AGENT_YAML.replace(b"  turns", b"\tturns"),
    "two-documents.yaml": GOOD_AGENT_YAML + b"---\n" + GOOD_AGENT_YAML,
    "top-level-list.json": b"[1, 2, 3]\n",
    "top-level-scalar.yaml": b"just a string\n",
    "empty.json": b"",
    "whitespace.yaml": b"   \n\n",
    "meta-tampered.json": b'{"__statekit__": {"format": 999}, ' + GOOD_AGENT_JSON[1:],
    "meta-wrong-type.yaml": b"__statekit__: [1]\n" + GOOD_AGENT_YAML,
    "version-from-the-future.json": GOOD_AGENT_JSON.replace(b'"name"', b'"__version__": 99, "name"'),
    "version-not-int.yaml": GOOD_AGENT_YAML.replace(b"  name", b"  __version__: two\n  name"),
    "wrong-types.json": b'{"agent": {"name": 1, "turns": "1", "temperature": null, "tags": "web", "memory": []}}\n',
    "bool-as-int.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: true"),
}


LARGE: dict[str, bytes] = {
    # too big to keep in the repository: made when the tests run
    "huge-string.json": GOOD_AGENT_JSON.replace(b"Friday", b"F" * 3_000_000),
    "huge-line.yaml": yaml_with(b"x" * 3_000_000),
    "huge-literal-block.yaml": yaml_with(b"|\n" + b"    line\n" * 300_000).replace(b"\n  turns", b"  turns", 1),
    "base-60-400k.yaml": GOOD_AGENT_YAML.replace(b"turns: 1", b"turns: " + b"1:" * 200_000 + b"1"),  # 1.1: quadratic
    "many-keys.json": b'{"agent": {' + b", ".join(b'"k%d": %d' % (i, i) for i in range(20_000)) + b"}}\n",
    "many-messages.yaml": GOOD_AGENT_YAML.replace(
        b"content: []", b"content:\n" + b"    - role: user\n      content: hi\n" * 5_000
    ),
}


def main(folder: Path = HERE) -> int:
    for name, raw in FILES.items():
        (folder / name).write_bytes(raw)
    print(f"wrote {len(FILES)} files to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE))
