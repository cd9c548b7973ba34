"""The grounding check's parts: output lines as a model is shown them, and quote matching.

`lines` numbers a call's output lines the way a language model sees them and resolves a
reference to them; `flat` is the whitespace-blind text a quote is searched in; `quotes` finds
a quote as models write them (gaps marked `...`, cut at either end). `sleuth.agent.findings`
puts them together behind report_finding.
"""
