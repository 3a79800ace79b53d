"""benchmarks/export_formats.py stays runnable: one small backbone under
TensorFlow, where every cell is measured (ONNX at fixed and dynamic
shapes, LiteRT): a Transformer encoder over padded rows, whose attention
masks once needed a TensorFlow op LiteRT's interpreter lacks."""

import pytest

from benchmarks import export_formats


@pytest.mark.one_backend("tensorflow")
def test_one_family_fills_every_cell():
    pytest.importorskip("onnxruntime")
    pytest.importorskip("tf2onnx")
    args = export_formats.parse_args(["--families", "text_transformer"])
    result = export_formats.measure(args)
    assert result["backend"] == "tensorflow"
    cells = result["rows"]["text_transformer"]
    assert sorted(cells) == sorted(export_formats.CELLS)
    assert cells["litert"]["flex_ops"] == []
    for cell in cells.values():
        assert "error" not in cell, cell
        assert cell["max_abs_diff"] < export_formats.TOLERANCE
    line = export_formats.row("tensorflow", result)
    assert line.startswith("tensorflow") and line.count(" ok") == 3


def test_cells_say_what_failed():
    assert export_formats.cell_text(None) == "-"
    assert export_formats.cell_text({"error": "export: X: y"}).startswith(
        "FAIL export"
    )
    over = export_formats.cell_text({"max_abs_diff": 2e-4})
    assert over == "2.0e-04 OVER 1e-4"
    flex = {"error": "interpreter: E", "flex_ops": ["TensorListStack"]}
    assert export_formats.cell_text(flex) == (
        "FAIL interpreter: E (Flex: TensorListStack)"
    )


def test_unknown_families_are_refused():
    with pytest.raises(SystemExit):
        export_formats.parse_args(["--families", "gpt,nope"])
