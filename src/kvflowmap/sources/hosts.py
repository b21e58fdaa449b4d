"""Host modules: the analysed vLLM's own connectors that drive the subject.

vLLM ships wrapper connectors whose hooks call into a connector package's
adapter (``LMCacheMPConnector`` calls ``lmcache``'s scheduler and worker
adapters). Analysed alone, such an adapter has no hook that reaches it, so a
wait without a timeout in it, or a request it drops, is invisible. A context
module of vLLM's connector package that imports a subject module is a host:
it is analysed as subject code, so its hooks reach the adapter, and the
check reports only what lies in the package under analysis (``host`` files
are dropped from the findings).

Found by a look at the import lines of the files' text (cheap, nothing is
parsed or run); a module is a host only when it names a subject module.
"""

from __future__ import annotations

import re
from dataclasses import replace

from kvflowmap.sources.roots import ModuleTable

_IMPORT = re.compile(rb"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import|import[ \t]+([\w.]+))", re.M)


def mark_hosts(table: ModuleTable, package: str, connector_package: str) -> list[str]:
    """Mark as host (subject, ``host``) every context module under
    ``connector_package`` that imports a subject module outside ``package``
    (vLLM itself: a vLLM subject has no host). Returns the hosts, sorted."""
    subject = {m for m, sf in table.files.items() if sf.subject}
    foreign = {m for m in subject if m.split(".")[0] != package}
    if not foreign:
        return []
    prefix = connector_package + "."
    hosts = []
    for module, sf in sorted(table.files.items()):
        if sf.subject or not (module.startswith(prefix) or module == connector_package):
            continue
        try:  # a FIFO would block the read: regular files only
            text = sf.path.read_bytes() if sf.path.is_file() else b""
        except OSError:
            continue
        if any((m[0] or m[1]).decode() in foreign for m in _IMPORT.findall(text)):
            table.files[module] = replace(sf, subject=True, host=True)
            hosts.append(module)
    return hosts
