# Issue 40 under issue 39's rules: a tenant and elections. Other prefixes'
# elections are 403 for every call and say nothing; the verbs, max_leases
# (leaderships) and max_waiters (waiting candidates) hold; a leader's value
# is bounded and never logged. Redis (the listing on etcd too is
# tenant_listing_etcd's; signed terms are tenant_kinds'; observe streams
# per token are tenant_conns').
picket_shell_test(tenant_elections ${CMAKE_CURRENT_LIST_DIR}/test_elections.sh
                  LABELS "tenant" TIMEOUT 120)
