"""Run history: the runs a launch recorded, their listing, timeline and HTML report.
"""
