"""The bundled models exported for decoding in the visitor's browser (docs/browser-decoding.md).

Read `export.py` first: `python -m s2d2 export-web --model NAME` traces the decoder's forward (s2d2/models/
onnx_forward.py) to ONNX, stores its weights compactly (`storage.py`), checks which checkpoints may be exported
(`limits.py`), and writes `manifest.json` (`manifest.py`). `onnx_model.py` runs an export behind the decoder's model
interface and `roundtrip.py` measures it against torch on every forward kind and on whole decodes; `cli.py` is the
command. Needs requirements-web.txt (onnx, onnxruntime) to export or check; the app serves the shipped files without
them (components/serve/browser_files.py).
"""
