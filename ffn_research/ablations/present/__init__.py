"""Each study's tables, figures and headline, apart from its runs and rules: present/NAME.py defines
`present(result, ctx)`, reading ablations/NAME.py; the study's `present` imports it when a report is drawn.
"""
