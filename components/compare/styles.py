"""The Compare tab's styles: the lane cards, the lane dropdowns (room for the arrow; a cut name ends in …) and the
what-if table."""
from __future__ import annotations

COMPARE_CSS = """
.s2d2-lanes{display:grid;grid-template-columns:repeat(auto-fit,minmax(min(260px,100%),1fr));gap:12px}
.s2d2-lane{border:1px solid #e5e7eb;border-radius:6px;padding:6px}
.s2d2-lane h4{margin:0 0 4px 0}
.s2d2-lane .s2d2-lane-id{color:#6b7280;font-size:.85em;margin:-2px 0 4px 0}
[id^=cmp-lane-] input[role=combobox]{padding-right:26px;text-overflow:ellipsis}
.cmp-lane-about{font-size:.85em;color:#4b5563;margin-top:-4px}
.cmp-lane-about p{margin:0}
.s2d2-whatif-wrap{max-height:420px;overflow:auto}
.s2d2-whatif td,.s2d2-whatif th{padding:2px 6px;border-bottom:1px solid #eee;font-size:.9em}
.s2d2-whatif tr.flip td{background:#fee2e2;font-weight:600}
.s2d2-whatif tr.unknown td{color:#9ca3af;background:#f9fafb}
"""
