"""The bundled models exported for decoding in the visitor's browser (docs/browser-decoding.md).

Read `export.py` first: `python -m s2d2 export-web --model NAME` traces the decoder's forward (s2d2/models/
onnx_forward.py) to ONNX, stores its weights compactly (`storage.py`), checks which checkpoints may be exported
(`limits.py`), and writes `manifest.json` (`manifest.py`). `roundtrip.py` measures the exported graph against torch on
every forward kind the decoder uses; `runtime.py` finds the pinned onnxruntime-web files the page loads. Needs
requirements-web.txt (onnx, onnxruntime) to export or check; the app serves shipped files without them.
"""
