"""Validates JSON documents against a JSON Schema (draft 2020-12) for ProviderSchemaTests.

    .venv/bin/python Tests/idp/schema_errors.py SCHEMA <instances.json

stdin: a JSON array of documents. stdout: a JSON array with, for each document, the JSON
paths ("$.tls.ca_file", in the loader's notation) of every error, nested ones (of oneOf, anyOf, if/then) included;
an empty list when the document is valid.
"""

import json
import sys

from jsonschema import Draft202012Validator


def json_path(error) -> str:
    """The loader's notation: $.key.key[0], whatever characters a key has."""
    return "$" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)


def paths(error) -> list[str]:
    found = [json_path(error)]
    for child in error.context or []:
        found += paths(child)
    return found


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        schema = json.load(handle)
    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    documents = json.load(sys.stdin)
    json.dump([sorted({p for e in validator.iter_errors(d) for p in paths(e)}) for d in documents], sys.stdout)


if __name__ == "__main__":
    main()
