"""The published JSON Schema: a valid Draft 2020-12 schema, the same file at both paths, usable
by any jsonschema tool on our JSON form; and every diagnostic code is documented and used."""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

import jsonschema

from customlayers.config import Diagnostics
from customlayers.config.codes import CODES
from customlayers.config.schema import JsonForm, load_schema
from customlayers.config.xmlload import parse_document

ROOT = Path(__file__).resolve().parent.parent.parent
PUBLISHED = ROOT / "schemas" / "customlayer.schema.json"
PACKAGED = ROOT / "customlayers" / "schemas" / "customlayer.schema.json"


def test_published_schema_is_a_relative_link_to_the_packaged_one():
    assert PUBLISHED.is_symlink()
    assert not os.path.isabs(os.readlink(PUBLISHED))
    assert PUBLISHED.resolve() == PACKAGED.resolve()
    assert json.loads(PUBLISHED.read_text()) == load_schema()


def test_schema_is_valid_draft_2020_12():
    schema = load_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(schema)


def json_form(text: str) -> dict:
    diags = Diagnostics()
    doc = parse_document(text, "<t>", diags)
    assert list(diags) == []
    return JsonForm(doc).instance


def test_json_form_checked_by_plain_jsonschema():
    good = (ROOT / "tests" / "data" / "configs" / "good" / "multi_root.xml").read_text()
    instance = json_form(good)
    assert instance["CustomLayer"][1]["Buffers"][0]["Data"][0] == \
        {"@name": "weights", "@arg-index": "1"}
    validator = jsonschema.Draft202012Validator(load_schema())
    assert list(validator.iter_errors(instance)) == []
    bad = good.replace('format="BFYX"', 'format="Bfyx"')
    errors = list(validator.iter_errors(json_form(bad)))
    assert [list(e.absolute_path) for e in errors] == \
        [["CustomLayer", 0, "Buffers", 0, "Tensor", 0, "@format"]]


def test_every_code_is_documented_and_used():
    used = set()
    for path in (ROOT / "customlayers").rglob("*.py"):
        if path.name != "codes.py":
            used |= set(re.findall(r'"(CL\d{3})"', path.read_text()))
    for schema in PACKAGED.parent.glob("*.schema.json"):
        used |= set(re.findall(r'"x-code": "(CL\d{3})"', schema.read_text()))
    assert used <= set(CODES), f"undocumented codes: {sorted(used - set(CODES))}"
    # a retired code keeps its entry (codes never change meaning) and is reported no more
    retired = {c for c, text in CODES.items() if text.endswith("(retired)")}
    assert not used & retired, f"retired codes still reported: {sorted(used & retired)}"
    live = set(CODES) - retired
    assert live <= used, f"documented but never reported: {sorted(live - used)}"


def test_mvcl_schema_is_published_and_referred_to_by_the_descriptor_schema():
    published = ROOT / "schemas" / "mvcl.schema.json"
    assert published.is_symlink() and not os.path.isabs(os.readlink(published))
    mvcl = load_schema("mvcl.schema.json")
    assert json.loads(published.read_text()) == mvcl
    jsonschema.Draft202012Validator.check_schema(mvcl)
    then = load_schema()["$defs"]["CustomLayer"]["then"]["$ref"]
    assert mvcl["$id"].endswith("/" + then)


def test_json_form_of_an_mvcl_layer_checked_by_plain_jsonschema():
    from referencing import Registry, Resource
    mvcl = load_schema("mvcl.schema.json")
    registry = Registry().with_resource(mvcl["$id"], Resource.from_contents(mvcl))
    validator = jsonschema.Draft202012Validator(load_schema(), registry=registry)
    text = (ROOT / "examples" / "layers" / "mvn_two_stage" / "mvn_two_stage.xml").read_text()
    assert list(validator.iter_errors(json_form(text))) == []
    bad = text.replace('type="output_buffer" port-index="1"', 'type="output_bufer" port-index="1"')
    errors = list(validator.iter_errors(json_form(bad)))
    assert [list(e.absolute_path) for e in errors] == \
        [["CustomLayer", 0, "Parameters", 0, "Tensor", 2, "@type"]]
