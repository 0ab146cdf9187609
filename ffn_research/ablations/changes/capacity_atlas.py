"""Design changes made after a result of this study was seen (the report lists them)."""

from ffn_research.ablations import base

CHANGES = (
  base.DesignChange(
    date='2026-11-30',
    commit='d13aa91',
    change='MoE storage at full: expert widths 8, 16, 32, 80 (total P 4.8k-43k, 8.9x) -> 8, 16, 32 (4.8k-17k, 3.6x, '
    "under the 8x the design asks); width 80 at the `large` scale only. Made after a preview judgement of pass 0's "
    'finished arms (every approximation arm; dense storage; MoE top-1 storage at widths 8 and 16), before any MoE '
    'width-32 or top-2 storage result was read, for cost alone: the finished storage arms ran 2.5-4x their pass-0 '
    'price, so the two width-80 arms (~25,000-50,000 run-seconds) would have spent the 18,000 reference-second cap '
    'in pass 0 and left no room for any pass-1 remedy (rate extensions, doublings)',
    outcome='no MoE storage verdict had been judged; the MoE storage numbers are read over 3 widths, not 4',
    verdicts=(4, 5),
  ),
)
