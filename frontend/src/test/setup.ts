import { configure } from "@testing-library/react";

// waitFor and findBy* wait for the DOM (a MutationObserver), by default
// for at most a second: a render on a loaded machine has taken longer. The
// bound is one only a state that never comes reaches (issue 36 item 7).
configure({ asyncUtilTimeout: 15_000 });
