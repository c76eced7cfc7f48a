# tests/browser: the web console (server/ui/) in a real headless browser:
# Debian's chromium driven by puppeteer-core (pinned in package-lock.json,
# installed by scripts/deps with npm ci), against real redis-server, picketd
# and fenced-kv processes. About 10 s on an idle machine; the timeout
# leaves room for a busy one. Its exchanges with picketd (the browser's
# too) go to the contract log, so contract_responses checks /ui/ as well.
picket_shell_test(browser_console ${CMAKE_CURRENT_LIST_DIR}/test_console.sh
                  LABELS browser TIMEOUT 180)
