#!/bin/sh
# Install Chromium from the distribution's packages for the HTML report's browser tests
# (tests/test_html_browser.py). Idempotent: does nothing when a Chromium is already on PATH.
#
#   scripts/install-chromium.sh            # as root, or with sudo available
#   SPECDIAG_CHROMIUM=/path/to/chrome ...   # use another binary instead (the tests honour it too)
#
# Debian/Ubuntu-with-deb only: Ubuntu's chromium-browser package is a snap wrapper that does not run in
# containers; on such hosts point SPECDIAG_CHROMIUM at any Chromium/Chrome binary instead.
set -eu

for name in chromium chromium-browser google-chrome google-chrome-stable; do
    if command -v "$name" >/dev/null 2>&1; then
        echo "install-chromium: $(command -v "$name") already installed: $("$name" --version 2>/dev/null || echo '?')"
        exit 0
    fi
done
if [ -n "${SPECDIAG_CHROMIUM:-}" ] && [ -x "${SPECDIAG_CHROMIUM}" ]; then
    echo "install-chromium: using SPECDIAG_CHROMIUM=${SPECDIAG_CHROMIUM}"
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "install-chromium: no apt-get here; install Chromium with the system's package manager" >&2
    exit 1
fi
SUDO=""
if [ "$(id -u)" != 0 ]; then
    if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
        echo "install-chromium: need root (or sudo) to apt-get install chromium" >&2
        exit 1
    fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
# the fonts make the screenshots and text metrics match on every machine
$SUDO apt-get install -y -q chromium fonts-dejavu-core fonts-liberation
chromium --version
