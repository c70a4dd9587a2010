"""Scheduler configuration files, implementation modules.

Import from :mod:`yarn_adapt.yarn.confxml`, the public entry point; the modules here
are its parts: ``xmlio`` (lxml edge), ``capacity_xml`` / ``fair_xml`` (read and patch),
``validate_capacity`` / ``validate_fair`` (YARN's rules), ``diff``, ``mutation``.
"""
