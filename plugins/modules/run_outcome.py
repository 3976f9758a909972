#!/usr/bin/python
# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# The work is done by the action plugin of the same name, on the controller; this file holds its
# documentation, as ansible.builtin.debug's does.

from __future__ import annotations

DOCUMENTATION = r"""
module: run_outcome
short_description: Judge the run (PASS or FAIL), write junit.xml and the history, and end the play
version_added: 0.1.0
description:
  - "The run's last task, on the controller, whatever happened before it (a setup failure too): reads
    C(run.json) in C(aorta_results_dir_resolved) and, when traces were analysed, its
    C(aorta_benchmark_report.json)."
  - "The verdict is V(PASS) when the run COMPLETED, every CVS threshold that was judged holds and
    nothing was found, else V(FAIL) with one reason per cause (the run's status and message, each
    threshold not met, each finding: slow node, straggler, slow link, drift, link errors, a
    regression against the baseline). A finding kind listed in C(aorta_verdict_ignores) is a note
    instead. The report's first row says the same verdict (both come from the same function)."
  - "Writes the verdict into C(run.json) (key C(verdict)), C(junit.xml) beside it (one testsuite per
    run; a testcase per node and stage, per threshold and per finding) and the run's row into
    C(index.json) and C(index.html) of the results root (the results directory's parent), under a
    lock, each file replaced atomically. A history that cannot be written is a warning."
  - "Prints the verdict as one line (under 300 characters) and says in RV(fails_play) whether the play
    must fail: when the run did not complete, when a finding was not ignored, or when a threshold
    was not met and C(aorta_fail_on_threshold) is true (its default, as in CVS). The play's next
    task fails with RV(line), after everything is written."
  - "Reads C(aorta_results_dir_resolved), C(aorta_fail_on_threshold), C(aorta_verdict_ignores) and
    C(aorta_baseline_ignore) (config keys left out of the history's fingerprint) from the play's
    variables."
options: {}
extends_documentation_fragment:
  - aorta.cluster._attributes.controller
attributes:
  check_mode:
    details: Judges the run and prints the verdict; writes no file.
"""

EXAMPLES = r"""
- name: Judge the run, write junit.xml and the history, and fail unless it passed
  aorta.cluster.run_outcome:
  register: aorta_run_outcome

- name: Fail the play unless the run passed
  ansible.builtin.fail:
    msg: "{{ aorta_run_outcome.line }}"
  when: aorta_run_outcome.fails_play
"""

RETURN = r"""
verdict:
  description: V(PASS) or V(FAIL).
  returned: always
  type: str
  sample: PASS
reasons:
  description: Why the run failed, one line each (empty when it passed).
  returned: always
  type: list
  elements: str
notes:
  description: What was judged, e.g. C(4 of 4 thresholds met), or why thresholds were not judged.
  returned: always
  type: list
  elements: str
line:
  description: "The console's last line, e.g. C(verdict PASS: 4 of 4 thresholds met)."
  returned: always
  type: str
status:
  description: The run's status from C(run.json).
  returned: always
  type: str
thresholds_failed:
  description: Whether a threshold was not met.
  returned: always
  type: bool
findings:
  description: The finding kinds that failed the verdict (e.g. V(slow_link)).
  returned: always
  type: list
  elements: str
ignored:
  description: The finding kinds found but kept as notes (C(aorta_verdict_ignores)).
  returned: always
  type: list
  elements: str
fails_play:
  description:
    - Whether the play must fail (the run did not complete, a finding was not ignored, or a threshold
      failed and C(aorta_fail_on_threshold)).
  returned: always
  type: bool
run_json:
  description: The path of C(run.json).
  returned: always
  type: str
junit:
  description: The path of C(junit.xml).
  returned: always
  type: str
index_html:
  description: The history page of the results root.
  returned: when the history was written
  type: str
index_json:
  description: The history's data.
  returned: when the history was written
  type: str
ansible_stats:
  description:
    - "For AWX, as M(ansible.builtin.set_stats) returns it: C(aorta_verdict), C(aorta_verdict_reasons),
      C(aorta_junit) and C(aorta_history)."
  returned: always
  type: dict
"""
