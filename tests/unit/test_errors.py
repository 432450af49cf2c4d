"""The error types: builtin bases, fields kept, context added without rebuilding the message."""
import pytest

from customlayers.errors import (ConfigError, CustomLayersError, FormulaError, KernelBuildError,
                                 ModelError, UnknownLayerError, UnsupportedLayersError)


def test_each_error_is_also_the_builtin_that_fits():
    assert issubclass(ConfigError, ValueError) and issubclass(FormulaError, ValueError)
    assert issubclass(KernelBuildError, RuntimeError) and issubclass(UnknownLayerError, KeyError)
    assert issubclass(UnsupportedLayersError, ModelError)


def test_context_prefixes_the_message_and_keeps_the_fields():
    e = FormulaError("division by zero (X=0)", "Y/X", 2, layer="Reorg", attribute="global")
    plain = str(e)
    e.context = "layer 'r1' (type Reorg) at model.xml:7"
    assert str(e) == f"layer 'r1' (type Reorg) at model.xml:7: {plain}"
    assert (e.formula, e.position, e.attribute) == ("Y/X", 2, "global")


def test_unknown_layer_message_is_not_quoted_like_a_key():
    assert str(UnknownLayerError("no layer 'X'; known: A, B")) == "no layer 'X'; known: A, B"


def test_raised_with_context_from_the_executor():
    with pytest.raises(CustomLayersError) as info:
        err = KernelBuildError("build failed", log="k.cl:3:1: error: x", device="dev")
        err.context = "layer 'c' (type Conv)"
        raise err
    assert str(info.value).startswith("layer 'c' (type Conv): build failed\nk.cl:3:1: error: x")
