"""One experiment on many hosts through procrastinate, a PostgreSQL-backed task queue, in
the results database itself (docs/FLEET.md). A job is one paired round of one host's
variants; `blocklab agent --host NAME` runs one job at a time and writes runs with
host=NAME; `blocklab fleet submit|status|cancel|move` drive and watch the queue.

Layer: above execution (an agent runs rounds through blocklab.execution) and analysis; may
import execution, analysis, experiment_file and everything below; never commands or report.
"""
