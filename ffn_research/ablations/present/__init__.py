"""Each study's tables, figures and headline, apart from its runs and rules: present/NAME.py defines
`present(result, ctx)`, reading ablations/NAME.py (never imported by it); `ablations.get` attaches it.
"""
