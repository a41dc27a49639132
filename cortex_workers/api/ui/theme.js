// Light, dark, or the system's choice; remembered in this browser (localStorage).

const KEY = "cortex-theme";
const ORDER = ["auto", "light", "dark"];
const SPOKEN = { auto: "follow the system", light: "light", dark: "dark" };

function apply(button, theme) {
  if (theme === "auto") delete document.documentElement.dataset.theme;
  else document.documentElement.dataset.theme = theme;
  button.textContent = `Theme: ${theme}`;
  button.setAttribute("aria-label", `Colour theme: ${SPOKEN[theme]}`);
}

export function wireTheme(button) {
  let theme = localStorage.getItem(KEY);
  if (!ORDER.includes(theme)) theme = "auto";
  apply(button, theme);
  button.addEventListener("click", () => {
    theme = ORDER[(ORDER.indexOf(theme) + 1) % ORDER.length];
    localStorage.setItem(KEY, theme);
    apply(button, theme);
  });
}
