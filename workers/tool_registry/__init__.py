"""What tools are made of, shared by every queue: the tool model and registry, where tools come
from (assembly: built-ins, modules, plugins, MCP), what a running tool may know and use (its
call, guarded HTTP, system probes), and the catalogue of MCP tools published for other workers."""
