#!/usr/bin/env bash
# `kvedge chat-template` end to end: every case of the shared chat kit through
# the CLI (stdout byte for byte, or a clean failure carrying the template's
# raise_exception message), and the ChatML fallback warning for a model
# without a template. Usage: chat_template.sh KVEDGE [EMULATOR-PREFIXED ARGS]
# KVEDGE_CASE_STRIDE=N (set by the cross and sanitizer builds' ctest, where each process costs about a
# second): every Nth case, the first case of every template and every case expecting an error;
# kvedge_chat_template_test renders every case in process there.
set -euo pipefail
kit="${KVEDGE_SHARED:?}/conformance/chat"
work="$(mktemp -d)"
trap 'rm -rf "${work}"' EXIT

python3 - "${kit}" "${work}" "$@" <<'PY'
import json, os, subprocess, sys
kit, work, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
cases = json.load(open(f"{kit}/cases.json", encoding="utf-8"))
stride = int(os.environ.get("KVEDGE_CASE_STRIDE", "1"))
seen = set()
picked = []
for i, c in enumerate(cases):
    if i % stride == 0 or c["template"] not in seen or c.get("expected_error"):
        picked.append(c)
    seen.add(c["template"])
cases = picked
bad = 0
for c in cases:
    msgs = f"{work}/messages.json"
    json.dump(c["messages"], open(msgs, "w", encoding="utf-8"), ensure_ascii=False)
    args = cmd + ["chat-template", "--template", f"{kit}/templates/{c['template']}", "--messages", msgs,
                  "--bos", c["bos_token"], "--eos", c["eos_token"]]
    if c["add_generation_prompt"]:
        args.append("--add-generation-prompt")
    if c.get("now"):
        args += ["--now", c["now"]]
    p = subprocess.run(args, capture_output=True)
    err = p.stderr.decode("utf-8", "replace")
    if p.returncode < 0 or p.returncode >= 128 or "Sanitizer" in err:
        print(f"FAIL {c['id']}: crashed: {err}"); bad += 1; continue
    if c.get("expected_error"):
        if p.returncode == 0:
            print(f"FAIL {c['id']}: rendered instead of failing"); bad += 1
        elif not err.startswith("kvedge chat-template: error: "):
            print(f"FAIL {c['id']}: bad error line: {err}"); bad += 1
        elif c.get("error_kind") == "raise_exception" and c["error_message"] not in err:
            print(f"FAIL {c['id']}: message lacks {c['error_message']!r}: {err}"); bad += 1
    elif p.returncode != 0 or p.stdout != c["expected"].encode("utf-8"):
        print(f"FAIL {c['id']}: exit {p.returncode}, {err.strip()}"); bad += 1
print(f"chat-template CLI: {len(cases) - bad} of {len(cases)} kit cases pass")
sys.exit(1 if bad else 0)
PY

# A model without tokenizer.chat_template: ChatML, with a warning on stderr only.
printf '[{"role": "user", "content": "Hi"}]' >"${work}/m.json"
out="$("$@" chat-template -m "${KVEDGE_SHARED}/models/stories260K_llamacpp.gguf" --messages "${work}/m.json" \
       --add-generation-prompt 2>"${work}/err")"
expected=$'<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant'  # $(...) drops the final newline
if [[ "${out}" != "${expected}" ]]; then echo "FAIL: ChatML fallback printed: ${out}"; exit 1; fi
if ! grep -q "warning: .*no tokenizer.chat_template; using the ChatML fallback" "${work}/err"; then
  echo "FAIL: no fallback warning: $(cat "${work}/err")"; exit 1
fi
echo "ok: ChatML fallback with a warning"
