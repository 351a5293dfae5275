"""Credentials in primekit's own environment: which variables count (by name, from 8 characters, not a path to an
existing file), and a chat request's messages scrubbed of registered values, untouched when there is nothing to
scrub (the bridge sends the very same objects)."""

from __future__ import annotations

from evalkit.core import redact


def test_credential_named_variables_are_registered_and_paths_and_short_values_are_not(monkeypatch, tmp_path):
    planted = {"HF_TOKEN": "hf_envSecretsToken01", "AWS_ACCESS_KEY_ID": "AKIAENVSECRETS02",
               "AWS_SECRET_ACCESS_KEY": "envSecretsAwsKey03", "DB_PASSWORD": "envSecretsPass04",
               "GITLAB_PAT": "envSecretsPat05", "OPENAI_APIKEY": "envSecretsApikey06"}
    for name, value in planted.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SSH_AUTH_SOCK", str(tmp_path))  # names an existing file: not the secret
    monkeypatch.setenv("SHORT_TOKEN", "abc1234")  # under 8 characters
    monkeypatch.setenv("AWS_REGION", "envsecrets-region-1")  # not a credential's name
    # words that only contain a credential word: a person's or a desktop's name, which replies may well hold
    monkeypatch.setenv("GIT_AUTHOR_NAME", "Envsecrets Author")
    monkeypatch.setenv("XDG_SESSION_DESKTOP", "envsecrets-desktop")
    monkeypatch.setenv("KEYBOARD_LAYOUT", "envsecrets-layout")
    redact.register_env_secrets()
    registered = set(redact.registered_secrets())
    assert set(planted.values()) <= registered
    assert not {str(tmp_path), "abc1234", "envsecrets-region-1", "Envsecrets Author", "envsecrets-desktop",
                "envsecrets-layout"} & registered


def test_messages_are_scrubbed_of_registered_values_and_kept_as_they_are_otherwise():
    redact.register_secret("scrub-data-secret-0001")
    clean = [{"role": "user", "content": "hello"}, {"role": "tool", "content": [{"type": "text", "text": "x"}]}]
    assert redact.scrub_data(clean) is clean
    dirty = [{"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "k=scrub-data-secret-0001"}]}]
    assert redact.scrub_data(dirty) == [{"role": "tool", "tool_call_id": "c1",
                                         "content": [{"type": "text", "text": "k=[redacted]"}]}]
    assert dirty[0]["content"][0]["text"] == "k=scrub-data-secret-0001"  # the caller's copy is not changed
