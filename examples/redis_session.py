"""Keep an agent's state in Redis, shared by every process that can reach it.

    redis-server &                      # or any Redis you can reach
    python examples/redis_session.py "Hello from machine A"

The server is read from STATEKIT_REDIS_HOST and STATEKIT_REDIS_PORT (default
localhost:6379). Needs the redis extra: ``pip install 'statekit[redis]'``.
Keys follow the reference pattern, after a prefix that keeps apps apart:
``statekit-example:user_id:alice:session:chat:state``.
"""

from __future__ import annotations

import argparse
import os

from typed_agent import EchoAgent

from statekit import RedisSession


def main() -> None:
    """Save an agent for user alice, load it in a fresh object, list and delete."""
    parser = argparse.ArgumentParser(description="An echo agent kept in Redis.")
    parser.add_argument("text", nargs="?", default="Hello, Redis!", help="what to say")
    parser.add_argument("--keep", action="store_true", help="keep the session (it is deleted at the end)")
    args = parser.parse_args()
    host = os.environ.get("STATEKIT_REDIS_HOST", "localhost")
    port = int(os.environ.get("STATEKIT_REDIS_PORT", "6379"))
    with RedisSession(host, port, key_prefix="statekit-example:") as session:
        agent = EchoAgent(name="Friday")
        session.load("chat", "alice", agent=agent)  # nothing yet on the first run
        print(f"{agent.name}: {agent(args.text)}")
        session.save("chat", "alice", agent=agent)
        print(f"saved under {session.session_key('chat', 'alice')}")

        elsewhere = EchoAgent(name="?")  # another process would do the same
        session.load("chat", "alice", allow_not_exist=False, agent=elsewhere)
        print(f"loaded elsewhere: {elsewhere.name}, turn {elsewhere.turns}, {len(elsewhere.memory.content)} messages")
        print(f"alice's sessions: {session.list_sessions('alice')}")
        if not args.keep:
            session.delete("chat", "alice")
            print(f"deleted; alice's sessions: {session.list_sessions('alice')}")


if __name__ == "__main__":
    main()
