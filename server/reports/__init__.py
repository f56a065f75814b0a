"""What the command line and the tools print: the check's text and versioned JSON (``report_format``), SARIF
(``report_sarif``), the time/profile output (``timing_format``) and self-contained HTML reports (``report_html``).
"""
