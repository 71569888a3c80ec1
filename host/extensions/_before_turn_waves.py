"""beforeTurn's waves: which subscribers can be asked at the same time without changing what any of them sees.

The contract (DESIGN.md, Think's rule): subscribers run in load order, and each one is sent the `system` and
`toolNames` as the ones before it left them. Only an extension whose answer can change those two fields shapes what
the later ones see: one that runs beforeTurn in `enforce` mode and whose `permissions.turnConfig` grants `system`
or `activeTools` (an ungranted field is refused before the merge; a shadow hook's answer is never applied). Every
other subscriber's answer leaves the input of the ones after it as it was.

So the subscribers are cut into waves, each ending at (and including) an extension that can change the input: a
wave is sent at once (the same input to all of its members, in parallel), its answers merged in load order, and the
next wave is sent what the merge left. With the default grant (all the scalars, `system` and `activeTools` among
them) every extension ends a wave and the calls stay one after another, exactly as before; extensions granted
narrower fields (say `temperature`, `maxOutputTokens`) or in shadow mode share a wave and cost one round trip
together. What each extension is sent, and the merged result, are the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._state import ExtensionRuntime

#: The TurnConfig fields (manifest grant names) the beforeTurn snapshot is updated from.
INPUT_FIELDS = ("system", "activeTools")


def shapes_next(ext: ExtensionRuntime) -> bool:
    """Whether `ext`'s beforeTurn answer can change what the subscribers after it are sent."""
    if ext.manifest.hook_mode("beforeTurn") != "enforce":
        return False
    grant = ext.manifest.permissions.turn_config
    return any(field in grant for field in INPUT_FIELDS)


def wave_from(subs: Sequence[ExtensionRuntime], start: int) -> list[ExtensionRuntime]:
    """The wave `subs[start]` opens (it is running): it, then the subscribers after it up to and including the first
    that `shapes_next` — none after it when it shapes the input itself. A subscriber that is not running ends the wave
    before it: it is skipped when its turn comes, as always, unless it is running again by then — and then it opens a
    wave of its own, which must not ask again one that this wave already asked."""
    first = subs[start]
    wave = [first]
    if shapes_next(first):
        return wave
    for ext in subs[start + 1:]:
        if ext.state != "running":
            break
        wave.append(ext)
        if shapes_next(ext):
            break
    return wave
