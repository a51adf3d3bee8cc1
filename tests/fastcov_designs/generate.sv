// Generate constructs: a loop with named blocks holding signals, processes and instances; an
// unnamed if / else-if / else chain (its blocks are all `genblk<n>` by IEEE 1800 27.6, which
// Icarus numbers differently); a case generate; an if generate that an instance's parameters
// turn off (its points do not exist); signals declared in generate blocks.
module gen_top #(parameter N = 3, parameter MODE = 1) (input clk, input rst, input [N-1:0] d,
                                                      output [N-1:0] q, output [1:0] m);
  for (genvar i = 0; i < N; i = i + 1) begin : stage
    reg r;
    wire nxt = d[i] ^ r;
    always @(posedge clk) begin
      if (rst) r <= 1'b0;
      else r <= nxt;
    end
    assign q[i] = r;
    gen_cell #(.INV(i % 2)) u_cell (.clk(clk), .a(r));
  end
  if (MODE == 0) begin
    assign m = 2'd0;
  end else if (MODE == 1) begin
    reg [1:0] cnt;
    always @(posedge clk) cnt <= rst ? 2'd0 : cnt + 2'd1;
    assign m = cnt;
  end else begin
    assign m = 2'd3;
  end
  case (N)
    1: begin : one
      wire unused = 1'b0;
    end
    default: begin
      reg [N-1:0] last;
      always @(posedge clk) last <= d;
    end
  endcase
endmodule

module gen_cell #(parameter INV = 0) (input clk, input a);
  reg s;
  if (INV) begin : inverted
    always @(posedge clk) s <= ~a;
  end else begin : plain
    always @(posedge clk) s <= a;
  end
endmodule
