# Copyright (c) aorta.cluster contributors
# GNU General Public License v3.0+ (see LICENSES/GPL-3.0-or-later.txt or https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

# Private to this collection: the attribute descriptions every module shares; each module states
# only its own support and details.

from __future__ import annotations


class ModuleDocFragment:
    DOCUMENTATION = r"""
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
"""

    # The modules whose work an action plugin of the same name does on the controller.
    CONTROLLER_ACTION = r"""
attributes:
  diff_mode:
    support: none
  action:
    description: The work is done by an action plugin on the controller.
    support: full
"""

    # The modules whose work an action plugin of the same name does on the controller, whole: who
    # wrote them, the attributes' descriptions, and check mode supported in full unless a module
    # says otherwise (its own support wins).
    CONTROLLER = r"""
author:
  - aorta.cluster maintainers (@aorta-cluster)
attributes:
  check_mode:
    description: Can run in check_mode and return changed status prediction without modifying target.
    support: full
  diff_mode:
    description: Will return details on what has changed (or possibly needs changing in check_mode), when in diff mode.
    support: none
  action:
    description: The work is done by an action plugin on the controller.
    support: full
"""
