;;; emacs_check.el --- drive the README's eglot snippet against a real `pallasite serve'  -*- lexical-binding: t -*-
;; emacs --batch -l SNIPPET -l emacs_check.el KERNEL: prints "RESULT <json>" and exits 0, or
;; prints what it waited for in vain and exits 1. PALLASITE_TEST_PYTHON is the server's Python.
(require 'json)
(require 'flymake)

(let ((python (getenv "PALLASITE_TEST_PYTHON")))
  ;; The snippet's server, started with the test's interpreter instead of a `pallasite' on PATH.
  (setq eglot-server-programs
        (cons `((python-mode python-ts-mode) . (,python "-m" "pallasite.server.cli" "serve"))
              eglot-server-programs)))
;; Tier 0 only: nothing asks to trust the folder in this non-interactive run.
(setq-default eglot-workspace-configuration '(:pallasite (:trust (:mode "never"))))

(defun emacs-check--wait (what pred &optional seconds)
  (let ((deadline (+ (float-time) (or seconds 30))))
    (while (and (not (funcall pred)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall pred)
      (princ (format "TIMEOUT waiting for %s\n" what))
      (kill-emacs 1))))

(let* ((file (car command-line-args-left))
       (buf (find-file-noselect file))
       result)
  (setq command-line-args-left nil)
  (with-current-buffer buf
    (python-mode)
    (call-interactively #'eglot)
    (emacs-check--wait "eglot to manage the buffer" (lambda () (eglot-managed-p)))
    (emacs-check--wait "flymake diagnostics"
                       (lambda () (flymake-start) (flymake-diagnostics)) 60)
    (emacs-check--wait "a pallasite/status" (lambda () pallasite-status))
    (let ((diag (car (flymake-diagnostics))))
      (push (cons "diagnostic_line" (line-number-at-pos (flymake-diagnostic-beg diag))) result)
      (push (cons "diagnostic_text" (flymake-diagnostic-text diag)) result))
    (push (cons "status_before" (plist-get pallasite-status :target)) result)
    (push (cons "select_result" (pallasite-select-target "v5e")) result)
    (emacs-check--wait "the status to say v5e"
                       (lambda () (equal (plist-get pallasite-status :target) "v5e")))
    (push (cons "status_after" (plist-get pallasite-status :target)) result)
    (push (cons "mode_line" (pallasite-mode-line)) result)
    (push (cons "bad_chip" (pallasite-select-target "v9x")) result)
    (push (cons "check" (pallasite-check)) result)
    (push (cons "check_script" (pallasite-check-script)) result)
    ;; Explain: the code at point (on the diagnostic's line), then a typed one.
    (goto-char (flymake-diagnostic-beg (car (flymake-diagnostics))))
    (push (cons "code_at_point" (pallasite--code-at-point)) result)
    (push (cons "explain" (plist-get (pallasite-explain (pallasite--code-at-point)) :code)) result)
    (push (cons "explain_buffer" (with-current-buffer "*pallasite explain*" (buffer-string))) result)
    (push (cons "explain_typed" (plist-get (pallasite-explain " pls201") :code)) result)
    (push (cons "explain_unknown" (pallasite-explain "PLS999")) result)
    (eglot-shutdown (eglot-current-server)))
  (princ (format "RESULT %s\n" (json-encode result)))
  (kill-emacs 0))
