import { Slot } from "@radix-ui/react-slot";
import type { ButtonHTMLAttributes } from "react";

/**
 * Button is the one button: variants primary (the page's main action),
 * secondary, danger. asChild (Radix Slot) gives a link the same look
 * without nesting a button in it.
 */
export function Button({
  variant = "secondary",
  size = "md",
  asChild = false,
  className = "",
  ...rest
}: ButtonHTMLAttributes<HTMLButtonElement> & { variant?: "primary" | "secondary" | "danger"; size?: "sm" | "md"; asChild?: boolean } & Record<`data-${string}`, string | undefined>) {
  const Comp = asChild ? Slot : "button";
  return <Comp className={`sk-button ${className}`.trim()} data-variant={variant} data-size={size} {...(asChild ? {} : { type: "button" })} {...rest} />;
}
